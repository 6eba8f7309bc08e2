"""Which attention calls a Recorder writes: by step, call index within the micro-batch (layer),
module name, predicate.

Step, layer and name are known when the call happens; the predicate (`when`) is decided only
after backward, on the finished call, so the write of every candidate call is deferred to the
end of its step.
"""
import fnmatch
from dataclasses import dataclass
from typing import Callable, Iterable, Union

import torch

IntSelector = Union[None, int, Iterable[int], Callable[[int], bool]]
NameSelector = Union[None, str, Iterable[str]]

# Tensors the "nonfinite" predicate looks at: the output and every gradient.
PREDICATE_TENSORS = ("o", "do", "dq", "dk", "dv")


@dataclass(frozen=True)
class CallInfo:
    """Identity of one attention call: step, call index within its micro-batch (layer), module
    name, function, micro-batch of the step (0, 1, ... under gradient accumulation), call
    index within the whole step and its number among the step's events (forward calls and dO
    arrivals, in the order they happened)."""

    step: int
    layer: int
    name: str
    function: str
    micro_batch: int
    call_index: int
    forward_seq: int = 0


def _int_matcher(selector: IntSelector, what: str) -> Callable[[int], bool]:
    if selector is None:
        return lambda _: True
    if callable(selector):
        return lambda x: bool(selector(x))
    if isinstance(selector, int):
        return lambda x: x == selector
    try:
        chosen = frozenset(int(x) for x in selector)
    except TypeError as error:
        raise TypeError(f"attnscope_record: {what} must be None, an int, an iterable of ints or "
                        f"a callable, not {type(selector).__name__}") from error
    return lambda x: x in chosen


def _name_matcher(selector: NameSelector) -> Callable[[str], bool]:
    if selector is None:
        return lambda _: True
    patterns = [selector] if isinstance(selector, str) else list(selector)
    return lambda name: any(fnmatch.fnmatchcase(name, p) for p in patterns)


def nonfinite(call) -> bool:
    """Predicate: the call's output or one of its gradients holds a NaN or an Inf."""
    for key in PREDICATE_TENSORS:
        t = call.tensors.get(key)
        if t is not None and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return True
    return False


class Selection:
    """steps / layers: None (all), an int, ints, or a callable; names: fnmatch globs on the
    module name; when: None, "nonfinite" or a callable(call) -> bool evaluated after backward."""

    def __init__(self, steps: IntSelector = None, layers: IntSelector = None,
                 names: NameSelector = None, when=None):
        self._step = _int_matcher(steps, "steps")
        self._layer = _int_matcher(layers, "layers")
        self._name = _name_matcher(names)
        self.needs_name = names is not None
        if when == "nonfinite":
            when = nonfinite
        if when is not None and not callable(when):
            raise TypeError("attnscope_record: when must be None, 'nonfinite' or a callable")
        self._when = when

    def selects_step(self, step: int) -> bool:
        return self._step(step)

    def selects_call(self, info: CallInfo) -> bool:
        return self._step(info.step) and self._layer(info.layer) and self._name(info.name)

    def keeps(self, call) -> bool:
        """Final decision on a finished call (after backward); `call` has .info and .tensors."""
        return self._when is None or bool(self._when(call))
