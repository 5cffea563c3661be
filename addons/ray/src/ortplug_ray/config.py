"""What an actor needs to build its backend and map columns: :class:`BackendConfig`, picklable."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from ortplug.backend import HINTS, OnnxBackend
from ortplug.checkpoint import ResolvedCheckpoint
from ortplug.errors import OptionError, OptionTypeError
from ortplug.providers.session_options import SessionOptionsConfig

from .checkpoint import CheckpointLike, PortableCheckpoint, _plain

__all__ = ["BackendConfig"]


def _options_dict(value: SessionOptionsConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    return value.to_dict() if isinstance(value, SessionOptionsConfig) else _plain(value)


def _columns(names: Iterable[str] | None) -> tuple[str, ...] | None:
    """``keep_columns`` as a tuple; a lone string would become its letters, so it is refused."""
    if isinstance(names, str):
        raise OptionTypeError(
            f"keep_columns: expected a list of column names, got the string {names!r} "
            f"(write [{names!r}])"
        )
    return None if names is None else tuple(names)


def _one_column_per_input(_: object, __: attrs.Attribute[Any], columns: dict[str, str]) -> None:
    """``input_columns`` maps each model input from one column (two would feed it twice)."""
    seen: dict[str, str] = {}
    for column, name in columns.items():
        if name in seen:
            raise OptionError(
                f"input_columns: expected one column per model input, got {seen[name]!r} and "
                f"{column!r} both for input {name!r}"
            )
        seen[name] = column


def _hint_choice(_: object, __: attrs.Attribute[Any], hint: object) -> None:
    if hint not in HINTS:
        raise OptionError(f"performance_hint: expected one of {', '.join(HINTS)}, got {hint!r}")


def _portable(checkpoint: CheckpointLike) -> PortableCheckpoint:
    """:meth:`PortableCheckpoint.of` as a function (mypy's attrs plugin takes no classmethod)."""
    return PortableCheckpoint.of(checkpoint)


@attrs.frozen
class BackendConfig:
    """Everything an actor needs to build its backend and map columns: picklable, unlike a session.

    ``model`` takes any :data:`CheckpointLike`, resolved on the driver. ``policy``
    (a picklable provider policy) chooses the chain on each worker when
    ``providers`` is ``None``. ``input_columns`` maps batch columns to model
    inputs (default: same names); ``output_columns`` maps model outputs to the
    columns written (default: every output, same names). ``keep_columns`` are
    the batch columns copied to the output (default: all; ``["id"]`` spares
    copying large inputs back into the object store). ``id_column`` names rows
    in errors; ``chain_column``, when set, gets each row's actor report.
    ``performance_hint`` is the backend's (``"throughput"``: streams measured within the CPUs
    Ray gave the actor, each batch's parts run side by side).
    """

    model: PortableCheckpoint = attrs.field(converter=_portable)
    providers: tuple[Any, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(tuple)
    )
    session_options: dict[str, Any] = attrs.field(factory=dict, converter=_options_dict, hash=False)
    policy: Any = attrs.field(default=None, eq=False)
    input_columns: dict[str, str] = attrs.field(
        factory=dict, converter=_plain, validator=_one_column_per_input, hash=False
    )
    output_columns: dict[str, str] = attrs.field(factory=dict, converter=_plain, hash=False)
    keep_columns: tuple[str, ...] | None = attrs.field(default=None, converter=_columns)
    id_column: str | None = None
    chain_column: str | None = None
    performance_hint: str = attrs.field(default="latency", validator=_hint_choice)

    def checkpoint(self) -> ResolvedCheckpoint:
        """The checkpoint, resolved where this runs (on a worker: from the portable form)."""
        return self.model.resolve()

    def build(self, threads: int | None = None) -> OnnxBackend:
        """The backend, with ``threads`` intra-op threads unless the options set their own; under
        a throughput hint its streams share ``threads`` CPUs (the CPUs Ray gave the actor)."""
        options = SessionOptionsConfig.from_dict(self.session_options)
        if threads is not None and options.intra_op_num_threads is None:
            options = options.evolve(intra_op_num_threads=threads)
        providers = list(self.providers) if self.providers is not None else None
        hint = self.performance_hint
        serving = None
        if hint != "latency" and threads:  # the serving add-on's (its install line otherwise)
            from ortplug.backend import ServingConfig

            serving = ServingConfig(cpus=threads)
        return OnnxBackend.from_checkpoint(
            self.checkpoint(),
            providers,
            options,
            policy=self.policy,
            performance_hint=hint,
            serving=serving,
        )
