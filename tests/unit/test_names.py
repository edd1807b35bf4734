from tb_plugin.catalog.names import DEFAULT_SPAN, number_spans, parse_trace_name


def test_worker_and_stamp_from_2021_and_2026_names() -> None:
    old = parse_trace_name("worker0.1623143089861.pt.trace.json.gz")
    new = parse_trace_name("vm_562.1795654441914410211.pt.trace.json.gz")
    assert old is not None and (old.worker, old.stamp) == ("worker0", 1623143089861)
    assert new is not None and (new.worker, new.stamp) == ("vm_562", 1795654441914410211)


def test_worker_names_with_dots_and_no_stamp() -> None:
    dotted = parse_trace_name("host.example.com_77.123.pt.trace.json")
    plain = parse_trace_name("host_123.pt.trace.json")
    assert dotted is not None and (dotted.worker, dotted.stamp) == ("host.example.com_77", 123)
    assert plain is not None and (plain.worker, plain.stamp) == ("host_123", None)


def test_non_trace_names_are_ignored() -> None:
    for name in ("events.out.tfevents.1.host", "a.pt.trace.json.bak", "trace.json", "x.pt.trace.jsonl",
                 "x.pt.trace.json\n"):
        assert parse_trace_name(name) is None, name


def test_names_with_newlines_and_other_odd_characters_are_traces() -> None:
    for worker in ("new\nline", "\n", "工作者", 'q"uote', "back\\slash", "tab\there"):
        parsed = parse_trace_name(f"{worker}.5.pt.trace.json.gz")
        assert parsed is not None and (parsed.worker, parsed.stamp) == (worker, 5), worker


def test_spans_are_numbered_by_numeric_stamp_not_text() -> None:
    # As text "10" < "9"; numerically 9 comes first. Stamps of different lengths appear when formats change.
    assert number_spans([10, 9, 100]) == ["2", "1", "3"]
    assert number_spans([None]) == [DEFAULT_SPAN]
    assert number_spans([1795654442665628614, 1795654441914410211]) == ["2", "1"]
