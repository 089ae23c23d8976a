"""Building a KernelGraph like a forward pass: tensors with named dims, shape checks on every
kernel, edges with their dim maps, and a tape from which the backward pass is derived.

A `Tensor` is a kernel's output as a consumer sees it: `dims` may re-label the producer's
output (a view: `tokens` read as `batch x q_seq`, element count checked) or select a part of
it (`part=True`: a slice or one piece of a concatenation). Every kernel has at most one
output with outgoing edges (its first OUTPUT operand); weight-gradient kernels may write
further outputs, which are sinks.

Backward (`GraphBuilder.backward`): the tape holds, per forward kernel, a rule that emits its
backward kernels given the gradient of its output. Gradients reaching one tensor from several
consumers are summed by a `<producer>_grad_sum` kernel. Weight-gradient kernels are emitted
after all activation-gradient kernels, as DFModel orders them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from generator.graph import (
    Communication,
    Edge,
    Kernel,
    KernelGraph,
    KernelKind,
    Operand,
    OperandRole,
    Pass,
)

Dim = tuple[str, int]  # one loop dim: (name, size)
Dims = tuple[Dim, ...]


def dims_elements(dims: Sequence[tuple[str, int]]) -> int:
    return math.prod(size for _, size in dims)


@dataclass(frozen=True)
class Tensor:
    key: int
    producer: str  # kernel name; "" = a graph input (read from memory, no edge)
    dims: Dims  # as the consumer sees it
    bytes_per_element: float
    requires_grad: bool = True
    origin: Dims = ()  # the producer's output dims (() = same as dims)
    part: bool = False  # dims cover a part of the producer's output (or it covers a part)

    @property
    def elements(self) -> int:
        return dims_elements(self.dims)

    @property
    def source_dims(self) -> Dims:
        return self.origin or self.dims

    @property
    def source_bytes(self) -> float:
        return dims_elements(self.source_dims) * self.bytes_per_element


@dataclass(frozen=True)
class Arg:
    """One operand of a kernel being built. `src`: the tensor(s) feeding it (several = parts of
    a concatenation); None = read from memory (weights, KV cache, graph inputs)."""

    name: str
    role: OperandRole
    dims: Dims
    bytes_per_element: float
    src: Tensor | tuple[Tensor, ...] | None = None


def infer_dim_map(
    src: Sequence[tuple[str, int]], dst: Sequence[tuple[str, int]]
) -> tuple[tuple[str, str], ...]:
    """Which producer output dim is which consumer operand dim.

    1. equal names with equal sizes; 2. positionally where sizes match; 3. remaining dims by
    equal size, in order; 4. a flattened axis: a dim equal in size to the product of all
    remaining dims on the other side maps to (or from) the outermost of those with size > 1
    (`tokens` <-> `batch x q_seq`: a block split of tokens is a split of batch).
    Returns () when every pair has equal names, else every pair (identities included).
    """
    pairs: dict[str, str] = {}
    used: set[str] = set()
    dst_size = dict(dst)
    for name, size in src:
        if dst_size.get(name) == size and name not in used:
            pairs[name] = name
            used.add(name)
    for i, (name, size) in enumerate(src):
        if name in pairs or i >= len(dst):
            continue
        dname, dsize = dst[i]
        if dname not in used and dsize == size:
            pairs[name] = dname
            used.add(dname)
    for name, size in src:
        if name in pairs:
            continue
        for dname, dsize in dst:
            if dname not in used and dsize == size:
                pairs[name] = dname
                used.add(dname)
                break
    rest_src = [(n, s) for n, s in src if n not in pairs]
    rest_dst = [(n, s) for n, s in dst if n not in used]
    if len(rest_src) == 1 and len(rest_dst) >= 2 and dims_elements(rest_dst) == rest_src[0][1]:
        outer = next((n for n, s in rest_dst if s > 1), rest_dst[0][0])
        pairs[rest_src[0][0]] = outer
    elif len(rest_dst) == 1 and len(rest_src) >= 2 and dims_elements(rest_src) == rest_dst[0][1]:
        outer = next((n for n, s in rest_src if s > 1), rest_src[0][0])
        pairs[outer] = rest_dst[0][0]
    ordered = [(n, pairs[n]) for n, _ in src if n in pairs]
    if all(a == b for a, b in ordered):
        return ()
    return tuple(ordered)


BackwardRule = Callable[[Tensor | None], list[tuple[Tensor, Tensor]]]


@dataclass
class _TapeEntry:
    kernel: str
    out: Tensor
    rule: BackwardRule
    seed: bool = False  # the rule needs no incoming gradient (a loss)


class GraphBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.kernels: dict[str, Kernel] = {}
        self.edges: list[Edge] = []
        self._tape: list[_TapeEntry] = []
        self._next_key = 0
        self._recomputed: dict[str, str] = {}
        self._deferred: list[Callable[[], None]] = []
        self._in_backward = False
        # graph inputs: key -> the kernels reading them (kernel, operand, dim map, bytes)
        self._input_uses: dict[int, list[tuple[str, str, tuple[tuple[str, str], ...], float]]]
        self._input_uses = {}
        self._grad_inputs: dict[int, Tensor] = {}  # output key -> its incoming gradient
        self.boundary: list[Edge] = []

    # -- tensors -------------------------------------------------------------------------
    def _key(self) -> int:
        self._next_key += 1
        return self._next_key

    def input(
        self, dims: Sequence[tuple[str, int]], bpe: float, requires_grad: bool = True
    ) -> Tensor:
        """A graph input (activation from the previous graph instance, read from memory)."""
        return Tensor(self._key(), "", tuple(dims), bpe, requires_grad)

    @staticmethod
    def view(t: Tensor, dims: Sequence[tuple[str, int]]) -> Tensor:
        """The same tensor under other dim names/factorisation (element count must match)."""
        dims = tuple(dims)
        if dims_elements(dims) != dims_elements(t.source_dims) and not t.part:
            raise ValueError(f"view of {t.producer or 'input'}: {t.source_dims} as {dims}")
        return replace(t, dims=dims, origin=t.source_dims)

    @staticmethod
    def part(t: Tensor, dims: Sequence[tuple[str, int]]) -> Tensor:
        """A slice of `t` (fewer elements), or `t` as one piece of a larger operand."""
        return replace(t, dims=tuple(dims), origin=t.source_dims, part=True)

    def saved(self, t: Tensor) -> Tensor:
        """A forward activation as the backward pass reads it: from its recompute copy when the
        producer was recomputed."""
        if t.producer in self._recomputed:
            return replace(t, producer=self._recomputed[t.producer])
        return t

    # -- kernels -------------------------------------------------------------------------
    def add_vector(
        self, name: str, kind: KernelKind, args: Sequence[Arg], flop: float, **kw: Any
    ) -> Tensor:
        """A vector-unit kernel (kernel class Va_Va) with an output; keywords as add_kernel."""
        t = self.add_kernel(name, kind, args, flop, kernel_class="Va_Va", **kw)
        assert t is not None, name
        return t

    def add_kernel(
        self,
        name: str,
        kind: KernelKind,
        args: Sequence[Arg],
        flop: float,
        *,
        pass_: Pass = Pass.FWD,
        kernel_class: str = "",
        shardable: Sequence[str] = (),
        communication: Communication = Communication.NONE,
        communication_bytes: float = 0.0,
        communication_group: str = "",
        rule: BackwardRule | None = None,
        seed: bool = False,
        requires_grad: bool = True,
        in_place: str = "",
    ) -> Tensor | None:
        """Add one kernel; returns its first output as a Tensor (None when it has none).
        `in_place`: the input operand whose buffer its output overwrites (Kernel.in_place)."""
        if name in self.kernels:
            raise ValueError(f"{self.name}: duplicate kernel name {name}")
        if self._in_backward and pass_ == Pass.FWD:
            pass_ = Pass.BWD
        loop: dict[str, int] = {}
        order = sorted(args, key=lambda a: a.role != OperandRole.OUTPUT)
        for arg in order:
            for dim, size in arg.dims:
                if size <= 0:
                    raise ValueError(f"{name}.{arg.name}: dim {dim} has size {size}")
                if loop.setdefault(dim, size) != size:
                    raise ValueError(f"{name}: dim {dim} is {loop[dim]} and {size}")
        operands = []
        for arg in args:
            names = tuple(d for d, _ in arg.dims)
            if len(set(names)) != len(names):
                raise ValueError(f"{name}.{arg.name}: repeated dim in {names}")
            operands.append(Operand(arg.name, arg.role, names, arg.bytes_per_element))
        group = communication_group or DEFAULT_GROUP.get(communication, "")
        kernel = Kernel(
            name=name,
            kind=kind,
            dims=tuple(loop.items()),
            operands=tuple(operands),
            flop=float(flop),
            pass_=pass_,
            kernel_class=kernel_class,
            shardable_dims=_shardable(shardable, loop),
            communication=communication if communication_bytes > 0 else Communication.NONE,
            communication_bytes=float(communication_bytes),
            communication_group=group if communication_bytes > 0 else "",
            in_place=in_place,
        )
        self.kernels[name] = kernel
        for arg in args:
            srcs = arg.src if isinstance(arg.src, tuple) else (arg.src,) if arg.src else ()
            for t in srcs:
                self._connect(t, name, arg, several=len(srcs) > 1)
        out_arg = next((a for a in args if a.role == OperandRole.OUTPUT), None)
        if out_arg is None:
            return None
        out = Tensor(self._key(), name, out_arg.dims, out_arg.bytes_per_element, requires_grad)
        if rule is not None and not self._in_backward:
            self._tape.append(_TapeEntry(name, out, rule, seed))
        return out

    def _connect(self, t: Tensor, dst: str, arg: Arg, several: bool) -> None:
        own = dims_elements(arg.dims)
        if not (t.part or several) and own != t.elements:
            raise ValueError(f"{dst}.{arg.name}: {arg.dims} fed by {t.dims} ({t.producer})")
        if t.dims != arg.dims and not t.part and not several:
            t = self.view(t, arg.dims)
        tensor_bytes = min(t.source_bytes, own * arg.bytes_per_element)
        dim_map = infer_dim_map(t.source_dims, arg.dims)
        if not t.producer:
            self._input_uses.setdefault(t.key, []).append((dst, arg.name, dim_map, tensor_bytes))
            return
        self.edges.append(Edge(t.producer, dst, arg.name, "", dim_map, tensor_bytes))

    def carry(self, produced: Tensor | None, into: Tensor | None) -> None:
        """`produced` becomes graph input `into` of the next instance of this graph (a layer's
        output, the next layer's input; an input gradient, the previous layer's output
        gradient): one boundary edge to each kernel that reads `into` (a layer's input is
        read by its first norm and its residual add; an output gradient by the first
        backward GEMM, its weight gradient and the residual's gradient sum), so that chained
        instances (generator.chain) order every reader after the producer; the edges form
        one conversion group, which pays each layout it needs once per instance."""
        if produced is None or into is None or not produced.producer:
            return
        if produced.source_dims != into.source_dims:
            return
        for dst, operand, dim_map, tensor_bytes in self._input_uses.get(into.key, []):
            self.boundary.append(Edge(produced.producer, dst, operand, "", dim_map, tensor_bytes))

    def gradient_input(self, output: Tensor) -> Tensor | None:
        """The graph input carrying `output`'s gradient into `backward`."""
        return self._grad_inputs.get(output.key)

    # -- backward ------------------------------------------------------------------------
    def defer(self, fn: Callable[[], None]) -> None:
        """Emit kernels after all activation-gradient kernels (weight gradients)."""
        self._deferred.append(fn)

    def sum_grads(self, target: Tensor, parts: list[Tensor]) -> Tensor:
        """One gradient for `target` from the partial gradients of its consumers."""
        if len(parts) == 1 and parts[0].elements == dims_elements(target.source_dims):
            return parts[0]
        base = f"{target.producer or 'input'}_grad_sum"
        name, i = base, 2
        while name in self.kernels:
            name, i = f"{base}{i}", i + 1
        out_dims = target.source_dims
        args = [
            Arg(f"in{j + 1}", OperandRole.INPUT, p.dims, p.bytes_per_element, p)
            for j, p in enumerate(parts)
        ]
        args.append(Arg("out", OperandRole.OUTPUT, out_dims, target.bytes_per_element))
        flop = max(1, len(parts) - 1) * dims_elements(out_dims)
        out = self.add_kernel(
            name,
            KernelKind.ELEMENTWISE,
            args,
            flop,
            pass_=Pass.BWD,
            kernel_class="Va_Va",
            shardable=[d for d, _ in out_dims],
        )
        assert out is not None
        return out

    def backward(self, outputs: Sequence[Tensor]) -> dict[int, Tensor]:
        """Emit the backward pass. Each of `outputs` receives its gradient from outside the
        graph (a graph input). Returns the gradient of every graph input that needs one."""
        grads: dict[int, list[Tensor]] = {}
        targets: dict[int, Tensor] = {}
        for t in outputs:
            seed = self.input(t.source_dims, t.bytes_per_element)
            self._grad_inputs[t.key] = seed
            grads[t.key] = [seed]
            targets[t.key] = t
        self._in_backward = True
        for entry in reversed(self._tape):
            if entry.seed:
                dy = None
            elif entry.out.key in grads:
                dy = self.sum_grads(entry.out, grads.pop(entry.out.key))
            else:
                continue
            for x, dx in entry.rule(dy):
                if x.requires_grad:
                    grads.setdefault(x.key, []).append(dx)
                    targets.setdefault(x.key, x)
        result = {key: self.sum_grads(targets[key], parts) for key, parts in grads.items()}
        for fn in self._deferred:
            fn()
        self._deferred.clear()
        self._in_backward = False
        return result

    def recompute(self, select: Callable[[Kernel], bool]) -> None:
        """Copy the selected forward kernels as `<name>_recompute` (pass RECOMPUTE), fed by
        the recompute copies of their producers where those exist."""
        for kernel in [k for k in self.kernels.values() if k.pass_ == Pass.FWD]:
            if not select(kernel):
                continue
            copy_name = f"{kernel.name}_recompute"
            self.kernels[copy_name] = replace(kernel, name=copy_name, pass_=Pass.RECOMPUTE)
            for edge in [e for e in self.edges if e.dst == kernel.name]:
                src = self._recomputed.get(edge.src, edge.src)
                self.edges.append(replace(edge, src=src, dst=copy_name))
            for uses in self._input_uses.values():
                uses += [(copy_name, *u[1:]) for u in uses if u[0] == kernel.name]
            self._recomputed[kernel.name] = copy_name

    def graph(self) -> KernelGraph:
        return KernelGraph(
            self.name, tuple(self.kernels.values()), tuple(self.edges), tuple(self.boundary)
        )


# Communication group of a kernel's implied collective, by collective type. The proto has no
# group field, so the group is a function of the type (generators follow it too).
DEFAULT_GROUP: dict[Communication, str] = {
    Communication.ALL_REDUCE_PERIODIC: "dp",
    Communication.ALL_TO_ALL: "ep",
    Communication.ALL_REDUCE: "tp",
    Communication.ALL_GATHER: "tp",
    Communication.REDUCE_SCATTER: "tp",
    Communication.POINT_TO_POINT: "pp",
}


def _shardable(declared: Sequence[str], loop: dict[str, int]) -> tuple[str, ...]:
    """The declared dims a kernel may split, those of size 1 left out; all of them when
    every one has size 1 (a one-token decode norm's `tokens`): an empty tuple reads as
    "every loop dim" (solver.cost.menus.sharding_choices), and a dim too small for the TP
    degree is no choice there anyway."""
    kept = tuple(d for d in declared if loop.get(d, 0) > 1)
    return kept or tuple(d for d in declared if d in loop)
