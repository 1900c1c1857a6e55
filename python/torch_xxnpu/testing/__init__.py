"""Correctness tooling for xxnpu kernels.

``python -m torch_xxnpu.testing.opcheck`` runs PyTorch's OpInfo database and the
``torch.ops.xxnpu`` custom ops on xxnpu and on the CPU and reports, per op and dtype,
whether the op ran natively or through the CPU fallback and whether the results match
(docs/testing.md).
"""
