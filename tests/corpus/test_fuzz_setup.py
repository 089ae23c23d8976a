"""Fuzzing the front door: a mutated setup is either accepted or reported as SetupError.

Users edit setup files by hand, so any text may arrive. Parsing and validation must turn
every broken file into one-line messages naming the file, never into a traceback (an
IndexError deep in validation, a UnicodeError from the parser, a ValueError from an enum).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import load_setup
from schema.validation import validate_setup

GRAPH = """\
dataflow_graph {
  kernels {
    name: "Q"
    id: 1
    type: SYSTOLIC
    gemm_input1_weight { outer: 1 M: 256 K: 512 N: 128 tiling: N_TILING }
  }
  kernels {
    name: "Act"
    id: 2
    type: SIMD
    elementwise_input1 { outer: 1 M: 256 N: 128 }
  }
  connections { startIdx: 1 endIdx: 2 id: 1 }
}
system {
  num_chip: 4
  accelerator { core: 64 systolic_width: 16 systolic_height: 16 sram_cap: 1e7 freq: 1.2 }
  r { x: 4 link_bw_x: 50 par_x: "TP" }
  memory { dram_bw: 1000 dram_cap: 1.6e10 }
}
execution { execution_style: DATAFLOW num_config: 2 compute_util: 0.9 word: 2 }
gurobi { thread: 2 gap: 0.01 time: 30 }
"""

INFERENCE = """\
workload {
  llm_inference {
    model {
      inline {
        hidden_size: 512
        num_layers: 2
        num_heads: 8
        num_kv_heads: 2
        intermediate_size: 2048
        vocab_size: 1000
        num_experts: 4
        experts_per_token: 2
      }
    }
    phase: CHUNKED_PREFILL
    batch: 4
    input_len: 256
    chunk_size: 64
  }
  precision { weight: FP8 activation: BF16 }
}
system {
  chip: "H100-SXM5-80GB"
  num_chip: 8
  topology { kind: SWITCH degree: 4 link_bw_GBps: 450 parallelism: "TP" parallelism: "EP" }
  topology { kind: RING degree: 2 link_bw_GBps: 50 parallelism: "DP" }
}
solver { time_limit_s: 10 gap: 0.001 threads: 1 }
"""

TRAINING = """\
workload {
  llm_training {
    model { hf_model: "meta-llama/Llama-3.1-8B" }
    global_batch: 32
    micro_batch: 4
    seq_len: 1024
    zero_stage: 2
  }
}
system { preset: "DGX-H100" num_chip: 16 }
"""

HPL = """\
workload { hpl { N: 8192 B: 256 } }
system {
  num_chip: 2
  accelerator { bf16_tflops: 100 fp64_tflops: 50 sram_cap: 5e7 freq: 1.5 }
  memory { dram_bw: 900 dram_cap: 3.2e10 }
  topology { kind: TORUS degree: 2 link_bw_GBps: 25 torus_dims: 2 }
}
cost { accelerator_price: 10000 energy_per_flop_pJ: 0.5 }
"""

BASES = [GRAPH, INFERENCE, TRAINING, HPL]


def _schema_names() -> list[str]:
    """Every field name of the schema, to swap one field name for another."""
    names: set[str] = set()
    for message in setup_pb2.DESCRIPTOR.message_types_by_name.values():
        names.update(f.name for f in message.fields)
    return sorted(names)


FIELD_NAMES = _schema_names()
NUMBER = re.compile(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?")
FIELD = re.compile(r"\b([a-zA-Z_]\w*)(?=\s*[:{])")
ODD_NUMBERS = st.sampled_from(
    ["0", "-1", "-0.5", "nan", "inf", "-inf", "1e400", "1e35", "-1e31", "9223372036854775808",
     "-9223372036854775809", "0.0", "1e-320", "3", "7", "0x10", "1_000", "--1", "1e", ".5"]
)  # fmt: skip
NUMBERS = st.one_of(
    ODD_NUMBERS,
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
TEXT = st.characters(blacklist_categories=("Cs",))


@st.composite
def mutation(draw: st.DrawFn, text: str) -> str:
    """One random edit of the kind a hand-edited file suffers."""
    # Number and field-name edits keep the syntax, so they reach validation: weight them.
    kind = draw(st.sampled_from(
        ["del_char", "ins_char", "del_line", "dup_line", "swap_lines"] + ["number"] * 6
        + ["swap_field"] * 2
    ))  # fmt: skip
    lines = text.split("\n")
    if kind == "del_char" and text:
        i = draw(st.integers(0, len(text) - 1))
        return text[:i] + text[i + 1 :]
    if kind == "ins_char":
        i = draw(st.integers(0, len(text)))
        c = draw(st.one_of(st.sampled_from(list('{}:;"\\#[]<>-.e \n')), TEXT))
        return text[:i] + c + text[i:]
    if kind == "del_line":
        del lines[draw(st.integers(0, len(lines) - 1))]
        return "\n".join(lines)
    if kind == "dup_line":
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
        return "\n".join(lines)
    if kind == "swap_lines":
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    pattern = NUMBER if kind == "number" else FIELD
    spans = [m.span() for m in pattern.finditer(text)]
    if not spans:
        return text
    start, end = draw(st.sampled_from(spans))
    if kind == "swap_field":
        new = draw(st.sampled_from(FIELD_NAMES))
    elif text[start:end].lstrip("-").isdigit():  # an integer field mostly gets integers
        new = draw(st.one_of(*[st.integers(-3, 70000).map(str)] * 3, NUMBERS))
    else:
        new = draw(NUMBERS)
    return text[:start] + new + text[end:]


@st.composite
def mutated_setup(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        text = draw(mutation(text))
    return text


def _check(text: str) -> None:
    """Load and validate; only SetupError with one-line, file-naming messages may escape."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "setup.txt"
        path.write_text(text, encoding="utf-8")
        try:
            setup, loaded = load_setup(path)
            validate_setup(setup, loaded)
        except SetupError as exc:
            assert exc.problems
            for problem in exc.problems:
                assert problem.startswith(str(path)), problem
                assert "\n" not in problem, problem


@pytest.mark.parametrize("text", BASES, ids=["graph", "inference", "training", "hpl"])
def test_fuzz_bases_are_valid(text: str, tmp_path: Path) -> None:
    """The seeds pass validation, so mutations start from accepted input."""
    path = tmp_path / "setup.txt"
    path.write_text(text)
    validate_setup(*load_setup(path))


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_setup())
def test_mutated_setup_is_accepted_or_reported(text: str) -> None:
    _check(text)
