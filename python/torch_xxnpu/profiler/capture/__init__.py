"""On-demand capture: a torch.profiler trace of a running program that never called the
profiler, taken on request from another process (Kineto's on-demand mode with dynolog,
for xxnpu).

    # the program, started with the opt-in variable (read when it imports torch_xxnpu):
    XXNPU_PROFILER_ON_DEMAND=1 python train.py

    # any time later, from another shell:
    python -m torch_xxnpu.profiler.capture --pid PID --iterations 5 --out DIR

Iterations are delimited by torch.optim optimizer steps, or by
``torch.xxnpu.markers.step()`` in loops without an optimizer; ``--duration-ms`` takes a
time-bounded capture instead. The trace (CPU + xxnpu activities, ``ProfilerStep#N``
ranges) is written into DIR by the program and its path printed by the CLI.

Modules: ``cli`` (the requester, also ``request()`` for Python callers), ``agent`` (the
program's side, installed by ``import torch_xxnpu`` under the variable), ``protocol``
(what both share). See docs/profiler.md, "On-demand capture".
"""
# Nothing is imported here: the agent imports torch, the CLI does not need to.
