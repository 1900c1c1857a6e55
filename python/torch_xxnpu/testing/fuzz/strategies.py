"""Hypothesis strategies that draw fuzz cases (plain-data specs, execute.py makes the
tensors). Every list is ordered simplest first: hypothesis shrinks towards the first
element, so a minimised case uses the plainest layout, value and dtype that still fail."""
from hypothesis import strategies as st

LAYOUTS = ["keep", "transpose", "slice", "offset", "expand", "overlap"]
EXTREMES = ["nan", "inf", "-inf", "-0", "huge", "-huge", "tiny", "denormal", "one"]
OTHER_DTYPES = ["float32", "float64", "int64", "float16", "bfloat16", "int32", "bool", "uint8"]
OUT_SHAPES = ["empty", "noncontig", "flat", "bigger", "smaller", "scalar"]
INDEX_VALUES = ["-1", "n", "n+7", "-n-1", "max", "min"]


def _shapes():
    from hypothesis.extra.numpy import mutually_broadcastable_shapes

    return mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=5).map(
        lambda bs: [list(s) for s in bs.input_shapes])


@st.composite
def case_spec(draw, target):
    probe = draw(st.sampled_from(target.probes))
    spec = {
        "op": target.name,
        "dtype": draw(st.sampled_from(target.dtypes)),
        "probe": probe,
        # Mostly the first samples (the cheap ones to make), sometimes any of them.
        "sample": draw(st.one_of(st.integers(0, 7), st.integers(0, 63))),
        "seed": draw(st.integers(0, 2 ** 31 - 1)),
    }
    if probe in ("layout", "shapes", "inplace"):
        spec["layouts"] = draw(st.lists(st.sampled_from(LAYOUTS), max_size=4))
    if probe == "shapes":
        spec["shapes"] = draw(_shapes())
    if probe in ("extremes", "mixed_dtype", "mixed_device", "out_alias", "index_range"):
        spec["leaf"] = draw(st.integers(0, 5))
    if probe == "extremes":
        spec["extremes"] = draw(st.lists(st.sampled_from(EXTREMES), min_size=1, max_size=4))
        spec["every"] = draw(st.sampled_from([1, 2, 5]))
    if probe in ("mixed_dtype", "out_dtype"):
        spec["other_dtype"] = draw(st.sampled_from([d for d in OTHER_DTYPES if d != spec["dtype"]]))
    if probe in ("mixed_device", "out_device"):
        spec["device"] = draw(st.sampled_from(["cpu", "xxnpu:1"]))
    if probe == "out_shape":
        spec["how"] = draw(st.sampled_from(OUT_SHAPES))
    if probe == "index_range":
        spec["index"] = draw(st.sampled_from(INDEX_VALUES))
    return spec
