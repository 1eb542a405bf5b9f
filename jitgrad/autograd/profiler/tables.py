"""The text table of `EventList.table()`, torch.autograd.profiler_util's layout."""
import math


def _format_time(time_us):
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def _format_time_share(time_us, total_time_us):
    if total_time_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_time_us:.2f}%"


def _build_table(events, sort_by, row_limit, max_src_column_width, max_name_column_width,
                 max_shapes_column_width, header, top_level_events_only, time_unit, with_flops):
    """torch.autograd.profiler_util._build_table for CPU events."""
    if len(events) == 0:
        return ""
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device").replace("xpu", "device")
        if not hasattr(events[0], attr):
            raise ValueError(f"table(sort_by={sort_by!r}): no such column; use one of "
                             "'cpu_time', 'cpu_time_total', 'self_cpu_time_total', 'count'")
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)
    has_input_shapes = any(e.input_shapes for e in events)
    stacks = [e.stack for e in events if e.stack]
    has_stack = bool(stacks)

    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    src_width = None
    if has_stack:
        src_width = max(len(entry) for s in stacks for entry in s) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
               "# of Calls"]
    spacing = 2
    row_format, header_sep, line_length = "", "", -spacing

    def add_column(padding, text_dir=">"):
        nonlocal row_format, header_sep, line_length
        row_format += "{: " + text_dir + str(padding) + "}" + " " * spacing
        header_sep += "-" * padding + " " * spacing
        line_length += padding + spacing

    add_column(name_width)
    for _ in headers[1:]:
        add_column(12)
    if has_input_shapes:
        headers.append("Input Shapes")
        add_column(shapes_width)
    if has_stack:
        headers.append("Source Location")
        add_column(src_width, text_dir="<")
    flops_scale = None
    if with_flops:
        raw = [e.flops for e in events if e.flops > 0]
        if raw:
            units = ["FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"]
            k = int(max(0, min(math.log10(min(raw)) / 3, len(units) - 1)))
            flops_scale = 10.0 ** (-3 * k)
            headers.append(f"Total {units[k]}")
            add_column(12)

    def fmt(t):
        if time_unit == "s":
            return f"{t / 1e6:.3f}s"
        if time_unit == "ms":
            return f"{t / 1e3:.3f}ms"
        if time_unit == "us":
            return f"{t:.3f}us"
        return _format_time(t)

    def trim_path(path):
        if len(path) > src_width:
            path = path[len(path) - src_width:]
            if len(path) > 3:
                path = "..." + path[3:]
        return path

    total_self = sum(e.self_cpu_time_total for e in events)
    out = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_events_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [header_sep, row_format.format(*headers), header_sep]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_time_share(e.self_cpu_time_total, total_self),
               fmt(e.self_cpu_time_total), _format_time_share(e.cpu_time_total, total_self),
               fmt(e.cpu_time_total), fmt(e.cpu_time), e.count]
        if has_input_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if has_stack:
            row.append(trim_path(e.stack[0]) if e.stack else "")
        if flops_scale is not None:
            row.append("--" if e.flops <= 0 else f"{e.flops * flops_scale:8.3f}")
        out.append(row_format.format(*row))
        if has_stack and e.stack:
            blank = [""] * (len(headers) - 1)
            for entry in e.stack[1:]:
                out.append(row_format.format(*(blank + [trim_path(entry)])))
    out += [header_sep, f"Self CPU time total: {fmt(total_self)}"]
    return "".join(s + "\n" for s in out)
