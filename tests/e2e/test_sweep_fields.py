"""Sweep axes set on a Setup (mapshard/sweeps/fieldset.py): paths, types, repeated and
message-typed fields."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from mapshard.sweeps.fieldset import (
    _named_fields,
    convert_value,
    label_of,
    parse_field_path,
    set_field,
)
from schema import setup_pb2


def test_field_setting_rules() -> None:
    setup = setup_pb2.Setup()
    setup.system.topology.add(kind=setup_pb2.SWITCH, degree=4, link_bw_GBps=100)
    setup.system.topology.add(kind=setup_pb2.RING, degree=2, link_bw_GBps=25)
    setup.workload.llm_inference.batch = 8
    # a repeated message without an index: every element
    fp = parse_field_path("system.topology.link_bw_GBps")
    set_field(setup, fp, convert_value(fp, "400"))
    assert [lv.link_bw_GBps for lv in setup.system.topology] == [400, 400]
    fp = parse_field_path("system.topology[1].degree")
    set_field(setup, fp, convert_value(fp, "8"))
    assert [lv.degree for lv in setup.system.topology] == [4, 8]
    # a repeated scalar leaf: comma-separated list
    fp = parse_field_path("system.topology[0].parallelism")
    set_field(setup, fp, convert_value(fp, "TP, PP"))
    assert list(setup.system.topology[0].parallelism) == ["TP", "PP"]
    # a message leaf sets the given fields together and keeps the others
    fp = parse_field_path("workload.llm_inference")
    set_field(setup, fp, convert_value(fp, "input_len: 512 output_len: 64"))
    inf = setup.workload.llm_inference
    assert (inf.batch, inf.input_len, inf.output_len) == (8, 512, 64)
    # an empty repeated message gets one element; enums by name, any case
    empty = setup_pb2.Setup()
    fp = parse_field_path("system.topology.kind")
    set_field(empty, fp, convert_value(fp, "torus"))
    assert [lv.kind for lv in empty.system.topology] == [setup_pb2.TORUS]
    with pytest.raises(ValueError, match="valid: TOPOLOGY_UNSET, RING"):
        convert_value(fp, "mesh")
    with pytest.raises(ValueError, match='"system" is not repeated'):
        parse_field_path("system[0].chip")


def test_a_message_value_sets_the_zeros_it_names() -> None:
    """A proto3 zero reads as unset in a parsed message: `phase: PREFILL` (enum value 0)
    over a DECODE base was dropped, and the point ran a decode step labelled a prefill
    (found by fuzzing). The fields the text names are set, zeros included; the rest kept."""
    base = setup_pb2.Setup()
    text_format.Parse(
        'workload { llm_inference { model { hf_model: "Llama-3.1-8B" } phase: DECODE '
        "batch: 8 context_len: 1024 } }",
        base,
    )
    fp = parse_field_path("workload.llm_inference")
    value = convert_value(fp, "phase: PREFILL input_len: 128 batch: 0")
    set_field(base, fp, value)
    inf = base.workload.llm_inference
    assert inf.phase == setup_pb2.PREFILL and inf.batch == 0 and inf.input_len == 128
    assert inf.context_len == 1024 and inf.model.hf_model == "Llama-3.1-8B"  # kept
    assert label_of(value, fp) == "phase: PREFILL input_len: 128 batch: 0"
    # no zero named: the label is the message's own text, as before
    assert label_of(convert_value(fp, "input_len:  64"), fp) == "input_len: 64"
    # the names read from the text, nested, lists of messages included
    assert _named_fields('a: 0 b { c: 1 d < e: 0 > } f: [{g: 1}, {h: 2}] i: 3') == {
        "a": {}, "b": {"c": {}, "d": {"e": {}}}, "f": {"g": {}, "h": {}}, "i": {}
    }  # fmt: skip
    # nested: a zero inside a sub-message, the sub-message's other fields kept
    fp = parse_field_path("workload")
    set_field(base, fp, convert_value(fp, "llm_inference { context_len: 0 }"))
    assert inf.context_len == 0 and inf.input_len == 128 and inf.phase == setup_pb2.PREFILL
