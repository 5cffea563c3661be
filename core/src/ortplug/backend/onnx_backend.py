"""``OnnxBackend``: one ONNX Runtime session built once from a checkpoint, run many times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..checkpoint import CheckpointMetadata, ResolvedCheckpoint
from ..errors import InputValidationError
from ._plan import plan_session, resolve_checkpoint
from ._session import create_session
from ._validation import InputChecker, InputSpec

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..plugins.manager import PluginHost
    from ..policy import ProviderPolicy
    from ..session_options import SessionOptionsConfig

__all__ = ["OnnxBackend"]


def _closed_run(*_: object) -> NoReturn:
    raise RuntimeError(
        "this OnnxBackend is closed; build a new one with OnnxBackend.from_checkpoint(...)"
    )


class OnnxBackend:
    """An :class:`~ortplug.InferenceBackend` backed by ONNX Runtime.

    The session is built once and reused by every :meth:`run`, which is safe to
    call from several threads. Build one with :meth:`from_checkpoint`, or wrap
    a session you own with ``OnnxBackend(metadata, session)``.
    """

    def __init__(self, metadata: CheckpointMetadata, session: Any) -> None:
        if not isinstance(metadata, CheckpointMetadata):
            raise TypeError(f"metadata: expected CheckpointMetadata, got {type(metadata).__name__}")
        if not callable(getattr(session, "run", None)):
            raise TypeError(
                f"session: expected an onnxruntime.InferenceSession, got {type(session).__name__}"
            )
        checker = InputChecker.from_session(session)
        output_names = [o.name for o in session.get_outputs()]
        metadata.require_names_in(
            checker.names,
            output_names,
            origin="metadata",
            also_accepted=sorted(checker.overridable),
        )
        self._metadata = metadata
        self._session: Any = session
        self._output_names = output_names
        self._checker = checker
        self._providers = tuple(session.get_providers())
        self._run = session.run
        self._requested = self._providers
        self._build_messages: tuple[str, ...] = ()
        self._chain_reasons: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: ResolvedCheckpoint,
        providers: Sequence[Any] | None = None,
        session_options: SessionOptionsConfig | None = None,
        *,
        policy: ProviderPolicy | None = None,
        plugins: PluginHost | None = None,
    ) -> Self:
        """Build a backend by loading a checkpoint into a new ONNX Runtime session.

        With ``providers=None`` the policy (default :class:`DefaultProviderPolicy`)
        picks a chain for this checkpoint and host, enforced gracefully. An explicit
        ``providers`` list (config objects, ``{"kind": ...}`` dicts, ``"cuda"`` or
        ``"CUDAExecutionProvider"``) is used as given and enforced strictly: a
        requested accelerator that is not realized raises
        :class:`~ortplug.errors.ProviderNotRealizedError`. ``plugins`` selects the
        plugin host (default: the process-wide one).
        """
        resolved = resolve_checkpoint(checkpoint)
        plan = plan_session(resolved, providers, session_options, policy, plugins)
        build = create_session(
            resolved.source, plan.options, plan.chain, strict=plan.strict, label=resolved.label
        )
        backend = cls(resolved.metadata, build.session)
        backend._requested = build.requested
        backend._build_messages = build.messages
        backend._chain_reasons = tuple(zip((c.kind for c in plan.chain), plan.reasons))
        return backend

    @property
    def metadata(self) -> CheckpointMetadata:
        """Metadata describing the checkpoint this backend executes."""
        return self._metadata

    @property
    def providers(self) -> tuple[str, ...]:
        """The provider chain ONNX Runtime realized, in priority order."""
        return self._providers

    @property
    def requested_providers(self) -> tuple[str, ...]:
        """The chain that was asked for (equal to ``providers`` for a wrapped session)."""
        return self._requested

    @property
    def chain_reasons(self) -> tuple[tuple[str, str], ...]:
        """``(kind, reason)`` for each provider asked for: the policy's reasons, or "explicit"."""
        return self._chain_reasons

    @property
    def build_messages(self) -> tuple[str, ...]:
        """What ONNX Runtime warned or logged while building the session."""
        return self._build_messages

    @property
    def input_names(self) -> list[str]:
        """The model's input names, in model order."""
        return self._checker.names

    @property
    def input_specs(self) -> tuple[InputSpec, ...]:
        """Each input's name, ORT type string and (symbolic) shape, in model order."""
        return self._checker.inputs

    @property
    def output_names(self) -> list[str]:
        """The model's output names, in model order (the keys ``run`` returns)."""
        return list(self._output_names)

    def node_assignment(self) -> dict[str, int]:
        """How many graph nodes each provider took, e.g. ``{"CUDAExecutionProvider": 41, ...}``.

        Needs the session config entry ``session.record_ep_graph_assignment_info=1``
        (``SessionOptionsConfig(config_entries=...)``); without it this raises
        ``RuntimeError`` saying so.
        """
        if self._session is None:
            _closed_run()
        try:
            subgraphs = self._session.get_provider_graph_assignment_info()
        except Exception as exc:
            raise RuntimeError(
                "node assignment was not recorded: build the backend with session_options="
                "SessionOptionsConfig(config_entries={'session.record_ep_graph_assignment_info': "
                f"'1'}}) ({type(exc).__name__}: {exc})"
            ) from exc
        counts: dict[str, int] = {}
        for subgraph in subgraphs:
            counts[subgraph.ep_name] = counts.get(subgraph.ep_name, 0) + len(subgraph.get_nodes())
        return counts

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._session is None

    def run(self, inputs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        """Run the model on named input tensors; return every output by name.

        Raises :class:`~ortplug.errors.InputValidationError` naming each bad
        input (missing, unknown, dtype, rank, dimension), ``RuntimeError`` when
        the backend is closed.
        """
        if type(inputs) is not dict:
            inputs = dict(inputs) if isinstance(inputs, Mapping) else inputs
        try:
            results = self._run(self._output_names, inputs)
        except Exception as exc:
            self._raise_explained(inputs, exc)
        return dict(zip(self._output_names, results))

    def _raise_explained(self, inputs: object, exc: Exception) -> NoReturn:
        if self._session is None:
            raise exc
        problems = self._checker.problems(inputs)
        if problems:
            raise InputValidationError(problems) from exc
        raise RuntimeError(
            f"ONNX Runtime failed to run model {self._metadata.model_family!r} on "
            f"{list(self._providers)}: {type(exc).__name__}: {exc}"
        ) from exc

    def close(self) -> None:
        """Release the session; later ``run`` calls raise ``RuntimeError``. Idempotent."""
        self._session = None
        self._run = _closed_run

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._session is None else f"providers={list(self._providers)}"
        return f"<OnnxBackend {self._metadata.model_family!r} {state}>"
