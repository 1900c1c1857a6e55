"""Why a trace cannot be analysed: the exceptions, and what the messages say was expected."""

TRACE_EXPECTED = ("a chrome trace: a JSON object with a \"traceEvents\" list, as written by "
                  "torch.profiler's prof.export_chrome_trace(path)")
DEVICE_EXPECTED = ("xxnpu device activity: \"X\" events with cat kernel, gpu_memcpy or gpu_memset. "
                   "Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1] "
                   "around work on an xxnpu device")


class TraceError(Exception):
    """The input cannot be analysed; the message says what was expected instead."""


class ControlCharacterError(TraceError):
    """Valid JSON for lenient parsers, but a string holds a raw control character."""


class NoDeviceActivityError(TraceError):
    """A chrome trace without any device activity to analyse."""
