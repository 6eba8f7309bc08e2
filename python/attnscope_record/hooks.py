"""Interception: the attention functions a Recorder patches while it is active (a Hook each),
their wrappers, and the active Recorder the wrappers hand calls to.

A hook's function is patched where its library exports it (`homes`, modules found in
sys.modules, or a function listing them when the homes are many: a library the user did not
import is never imported) and wherever an already loaded module bound it at import time
(`from flash_attn import flash_attn_func` makes a global of the user's module); both are put
back when the Recorder deactivates. Modules of torch, of the hooked libraries and of
attnscope_record are left alone. A reference kept elsewhere (an object
attribute, a closure) is not reached: such code calls the wrapper itself (hooks_flex's
`flex_attention`, @attention).

One wrapper exists per (hook, function), so patching again installs the same object and
torch.compile's guards on it hold from step to step. While Dynamo traces, the wrapper takes the
hook's `compiled` route (compiled.py) instead of recording in Python.
"""
import functools
import inspect
import sys
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Union

import torch

from .capture import warn

active = None  # the Recorder whose calls are being recorded, if any

# Top-level packages whose modules are not searched for bindings of a hooked function.
_UNTOUCHED_PACKAGES = {"torch", "xformers", "flash_attn", "attnscope_record"}


@dataclass(frozen=True, eq=False)
class Hook:
    """name: recorded as `function`; homes: (module, attribute) pairs exporting the function,
    or a function returning them (asked at each install); read: (bind's value, bound
    arguments) -> spec.CallSpec; compiled: (Function, args, kwargs) -> return value, the route
    while Dynamo traces; signature: None for the function's own."""

    name: str
    homes: Union[tuple, Callable[[], tuple]]
    read: Callable
    compiled: Callable
    signature: Optional[inspect.Signature] = None


class Function(NamedTuple):
    """A hooked function as its wrapper calls it."""

    hook: Hook
    original: Callable
    signature: inspect.Signature


_wrappers = {}  # (hook, original) -> wrapper
_patched = []  # (module, attribute, original, wrapper) installed by install()
# _bindings' search so far: its targets, and per module name (module, attributes holding one).
_scan = {"targets": None, "modules": {}}


def make_wrapper(hook: Hook, original):
    """A wrapper that records the calls of `original` while a Recorder is active and is
    `original` otherwise (@attention makes one per function)."""
    fn = Function(hook, original, hook.signature or inspect.signature(original))

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if torch.compiler.is_compiling():
            return hook.compiled(fn, args, kwargs)
        rec = active
        if rec is None or not rec._live:
            return original(*args, **kwargs)
        return rec._record_call(fn, args, kwargs, sys._getframe(1))

    wrapper.__attnscope_original__ = original
    return wrapper


def wrap(hook: Hook, original):
    """The one wrapper of (hook, original), made at its first use; None (after one warning)
    when `original` has no signature to read its calls by."""
    original = getattr(original, "__attnscope_original__", original)
    if (hook, original) not in _wrappers:
        try:
            _wrappers[hook, original] = make_wrapper(hook, original)
        except (TypeError, ValueError) as error:
            _wrappers[hook, original] = None
            warn(f"{hook.name} is not recorded: {error}")
    return _wrappers[hook, original]


def install(recorder, hooks):
    """Makes `recorder` the active one and patches the functions of `hooks` that are loaded."""
    global active
    active = recorder
    homes, targets = [], {}  # targets: id(function) -> (hook, function)
    for hook in hooks:
        for module_name, attribute in (hook.homes() if callable(hook.homes) else hook.homes):
            module = sys.modules.get(module_name)
            function = vars(module).get(attribute) if module is not None else None
            if function is not None:
                function = getattr(function, "__attnscope_original__", function)
                homes.append((module, attribute))
                targets[id(function)] = (hook, function)
    for module, attribute in homes + _bindings(targets):
        target = targets.get(id(vars(module).get(attribute)))
        wrapper = None if target is None else wrap(*target)
        if wrapper is not None:
            setattr(module, attribute, wrapper)
            _patched.append((module, attribute, target[1], wrapper))


def uninstall():
    """Puts every patched function back (unless someone replaced our wrapper since)."""
    global active
    for module, attribute, original, wrapper in reversed(_patched):
        if vars(module).get(attribute) is wrapper:
            setattr(module, attribute, original)
    _patched.clear()
    active = None


def _bindings(targets):
    """(module, attribute) of the globals of loaded modules (outside _UNTOUCHED_PACKAGES) that
    hold one of `targets`. A module is searched once while the targets stay the same, so a step
    pays only for the modules imported (or replaced) since the last one."""
    if _scan["targets"] != set(targets):
        _scan.update(targets=set(targets), modules={})
    known = _scan["modules"]
    for name, module in list(sys.modules.items()):
        if name in known and known[name][0] is module:
            continue
        namespace = getattr(module, "__dict__", None)
        searched = isinstance(namespace, dict) and \
            name.partition(".")[0] not in _UNTOUCHED_PACKAGES
        known[name] = (module, [a for a, value in list(namespace.items())
                                if id(value) in targets] if searched else [])
    _scan["modules"] = {n: entry for n, entry in known.items() if sys.modules.get(n) is entry[0]}
    return [(module, a) for module, found in _scan["modules"].values() for a in found]
