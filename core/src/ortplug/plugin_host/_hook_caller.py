"""Calls the plugins' hooks through pluggy's own loop, each implementation isolated and checked
(docs/internals.md, "The plugin host")."""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
from collections.abc import Callable, Collection
from typing import Any, NamedTuple, TypeVar

import pluggy

from ..plugins import hookspecs
from ..plugins.hookspecs import CONTRACTS, MAX_ITEMS, CallMode, HookContract
from ._failures import FailureLog

__all__ = ["HookCaller", "check_contract"]

_T = TypeVar("_T")
_MARKER = f"{hookspecs.PROJECT}_impl"


def _hook_functions(plugin: object) -> dict[str, Any]:
    """The functions of a plugin object marked with ``@hookimpl``, by attribute name."""
    found = {}
    for attr in dir(plugin):
        function = getattr(plugin, attr, None)
        if callable(function) and isinstance(getattr(function, _MARKER, None), dict):
            found[attr] = function
    return found


def check_contract(plugin: object) -> None:
    """Refuse what pluggy would accept but ortplug cannot call safely."""
    implementations = {
        name: function
        for name, function in _hook_functions(plugin).items()
        if name.startswith(f"{hookspecs.PROJECT}_")
    }
    if not implementations:
        raise TypeError(
            f"{plugin!r} has no @hookimpl-marked ortplug_* function; a plugin implements at "
            f"least one of {', '.join(sorted(CONTRACTS))}"
        )
    for name, function in implementations.items():
        options = getattr(function, _MARKER)
        if options.get("wrapper") or options.get("hookwrapper"):
            raise TypeError(
                f"hook implementation {name!r} is a wrapper; ortplug calls plugins one by "
                "one and supports only tryfirst/trylast ordering"
            )
        defaults = [
            parameter.name
            for parameter in inspect.signature(function).parameters.values()
            if parameter.default is not inspect.Parameter.empty
        ]
        if defaults:
            raise TypeError(
                f"hook implementation {name!r} gives argument(s) {defaults} a default; the "
                "host passes them by name, so remove the defaults"
            )


class _Answer(NamedTuple):
    """One implementation's checked answer: its items (a first result's list), with its plugin."""

    plugin: str
    items: list[Any]


class _Folding:
    """A fold in progress: the value as the implementations so far left it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Isolated:
    """What pluggy registers for one plugin: the plugin's hook functions, each guarded."""

    def __init__(self, plugin: object, functions: dict[str, Callable[..., Any]]) -> None:
        self.plugin = plugin
        for attr, function in functions.items():
            setattr(self, attr, function)

    def __repr__(self) -> str:
        return repr(self.plugin)  # pluggy's own errors name the plugin


class HookCaller:
    """The plugins registered with one pluggy manager, and the three ways of calling a hook."""

    def __init__(self, failures: FailureLog) -> None:
        self._failures = failures
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._local = threading.local()  # .folds: this thread's folds in progress

    # -- plugins ------------------------------------------------------------------------------

    def register(self, plugin: object, name: str) -> None:
        """Register ``plugin`` under ``name`` with its hooks guarded; raises what is refused.

        A refused plugin leaves the plugin that holds the name (or the object) in place.
        """
        holder = self._pm.get_plugin(name)
        if holder is not None:
            raise ValueError(
                f"plugin name {name!r} is already taken by {holder!r}; register "
                f"{plugin!r} under another name"
            )
        if any(isinstance(p, _Isolated) and p.plugin is plugin for p in self._pm.get_plugins()):
            raise ValueError(f"plugin {plugin!r} is already registered under another name")
        functions = {
            attr: self._guard(name, getattr(function, _MARKER), attr, function)
            for attr, function in _hook_functions(plugin).items()
        }
        isolated = _Isolated(plugin, functions)
        try:
            self._pm.register(isolated, name=name)
            self._pm.check_pending()
        except BaseException:
            if self._pm.get_plugin(name) is isolated:
                self._pm.unregister(name=name)
            raise

    def unregister(self, name: str, *, block: bool = False) -> None:
        """Remove the plugin registered as ``name`` (``block``: and refuse the name from now on)."""
        if self._pm.get_plugin(name) is not None:
            self._pm.unregister(name=name)
        if block:
            self._pm.set_blocked(name)

    def plugin(self, name: str) -> object | None:
        """The plugin object registered as ``name`` (``None``: none, or blocked)."""
        isolated = self._pm.get_plugin(name)
        return isolated.plugin if isinstance(isolated, _Isolated) else None

    def blocked(self, name: str) -> bool:
        """Whether ``name`` is blocked: pluggy ignores a plugin registered under it."""
        return self._pm.is_blocked(name)

    def known(self, name: str) -> bool:
        """Whether ``name`` is registered or blocked."""
        return self._pm.has_plugin(name) or self._pm.is_blocked(name)

    def names(self) -> list[tuple[str, bool]]:
        """Every registered or blocked name in registration order, with whether it is active."""
        return [(name, plugin is not None) for name, plugin in self._pm.list_name_plugin()]

    def hooks_of(self, name: str) -> tuple[str, ...]:
        """The hooks the plugin registered as ``name`` implements, sorted."""
        callers = self._pm.get_hookcallers(self._pm.get_plugin(name)) or ()
        return tuple(sorted(caller.name for caller in callers))

    # -- calls --------------------------------------------------------------------------------

    def collect(
        self, hook_name: str, only: Collection[str] | None = None, **kwargs: Any
    ) -> list[tuple[str, Any]]:
        """Every plugin's items (``only``: those plugins'), ``(plugin, item)``, in hook order."""
        answers: list[_Answer] = self._caller(hook_name, only)(**kwargs)
        return [(answer.plugin, item) for answer in answers for item in answer.items]

    def first_result(self, hook_name: str, **kwargs: Any) -> tuple[str, list[Any]] | None:
        """The first non-``None`` answer, ``(plugin, items)``; a malformed one counts as none."""
        answer: _Answer | None = self._caller(hook_name, None)(**kwargs)
        return None if answer is None else (answer.plugin, answer.items)

    def fold(
        self, hook_name: str, value: _T, only: Collection[str] | None = None, **kwargs: Any
    ) -> _T:
        """Pass ``value`` through every implementation (``only``: those plugins').

        ``None`` keeps the value; a wrong type is a failure.
        """
        folds: list[_Folding] = self._local.__dict__.setdefault("folds", [])
        folding = _Folding(value)
        folds.append(folding)
        try:
            self._caller(hook_name, only)(
                **{str(CONTRACTS[hook_name].fold_argument): value}, **kwargs
            )
        finally:
            folds.pop()
        result: _T = folding.value
        return result

    def _caller(self, hook_name: str, only: Collection[str] | None) -> Any:
        """pluggy's caller of ``hook_name``, limited to the plugins ``only`` names."""
        if only is None:
            return getattr(self._pm.hook, hook_name)
        others = [p for n, p in self._pm.list_name_plugin() if p is not None and n not in only]
        return self._pm.subset_hook_caller(hook_name, remove_plugins=others)

    def _guard(
        self, plugin: str, options: dict[str, Any], attr: str, function: Callable[..., Any]
    ) -> Callable[..., Any]:
        """``function`` as pluggy calls it: its failures recorded, its answer checked."""
        hook_name = options.get("specname") or attr
        contract = CONTRACTS.get(hook_name)
        if contract is None:  # not ortplug's: pluggy refuses it (or never calls an optional one)
            return function
        names = list(inspect.signature(function).parameters)
        folded = names.index(contract.fold_argument) if contract.fold_argument in names else None

        @functools.wraps(function)
        def guarded(*args: Any) -> Any:
            folding = self._local.folds[-1] if contract.mode is CallMode.FOLD else None
            if folding is not None and folded is not None:
                args = (*args[:folded], folding.value, *args[folded + 1 :])
            try:
                result = function(*args)
            except contract.propagate:
                raise
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # isolated: recorded as the plugin's failure
                self._failures.record(plugin, hook_name, exc)
                return None
            return self._checked(plugin, hook_name, contract, result, folding)

        setattr(guarded, _MARKER, options)
        return guarded

    def _checked(
        self,
        plugin: str,
        hook_name: str,
        contract: HookContract,
        result: Any,
        folding: _Folding | None,
    ) -> _Answer | None:
        """What pluggy gets from one implementation: its checked answer, or ``None`` to skip it."""
        if result is None:
            return None
        if folding is not None:
            problem = contract.check(folding.value, result) if contract.check else None
            if problem is None:
                folding.value = result
            else:
                self._failures.record(plugin, hook_name, TypeError(problem))
            return None
        items = self._items(plugin, hook_name, result, contract)
        return None if items is None else _Answer(plugin, items)

    def _items(
        self, plugin: str, hook_name: str, result: Any, contract: HookContract
    ) -> list[Any] | None:
        """At most ``MAX_ITEMS`` of an iterable answer, those of the contract's item types.

        An item of another type is left out and reported (the others are kept); ``None``
        when the answer is not iterable or raises (reported as a failure of ``plugin``).
        """
        try:
            items = list(itertools.islice(iter(result), MAX_ITEMS + 1))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            self._failures.record(plugin, hook_name, exc)
            return None
        wrong = [item for item in items if not isinstance(item, contract.items)]
        if wrong:
            wrong_type = TypeError(
                f"expected {contract.describe_items()} items, got {type(wrong[0]).__name__} "
                f"{wrong[0]!r:.80}; {len(wrong)} such item(s) left out, the others kept"
            )
            self._failures.record(plugin, hook_name, wrong_type)
            items = [item for item in items if isinstance(item, contract.items)]
        if len(items) > MAX_ITEMS:
            error = ValueError(f"yielded more than {MAX_ITEMS} items; the first {MAX_ITEMS} kept")
            self._failures.record(plugin, hook_name, error)
            items = items[:MAX_ITEMS]
        return items
