"""Generate docs/api.md, the API reference, from jitgrad's docstrings.

    python docs/gen_api.py           # rewrite docs/api.md
    python docs/gen_api.py --check   # exit 1 if docs/api.md is out of date

For each public module below, every public name is listed with its signature
and the first paragraph of its docstring (names without a docstring get
their signature only). Public names are the module's `__all__`; a package
without one publishes every non-underscore name it imports, and a plain
module without one the functions and classes it defines. Docstring examples
are left out, so this file holds no doctests (the docstrings' own examples
run with `pytest --doctest-modules jitgrad`).

Importing this module generates nothing; `render()` returns the text.
"""
import argparse
import importlib
import inspect
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "api.md")

# (module, curated names or None): the order of the sections of api.md.
MODULES = [
    ("jitgrad", None),
    ("jitgrad.autograd", None),
    ("jitgrad.autograd.graph", None),
    ("jitgrad.autograd.forward_ad", None),
    ("jitgrad.autograd.functional", None),
    ("jitgrad.autograd.profiler", None),
    ("jitgrad.autograd.fusion", ["explain", "is_fusion_enabled", "set_fusion_enabled"]),
    ("jitgrad.func", None),
    ("jitgrad.nn", None),
    ("jitgrad.nn.functional", None),
    ("jitgrad.nn.init", None),
    ("jitgrad.nn.utils", None),
    ("jitgrad.ops", None),
    ("jitgrad.optim", None),
    ("jitgrad.distributed", None),
    ("jitgrad.nn.parallel", None),
    ("jitgrad.optim.lr_scheduler", None),
    ("jitgrad.utils.data", None),
    ("jitgrad.compiler", None),
    ("jitgrad.cuda", None),
    ("jitgrad.accelerator", None),
    ("jitgrad.backends", None),
    ("jitgrad.testing", None),
]

_PROMPT = ">" * 3  # spelled so that this file holds no doctest prompt
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None  # an optional part (jitgrad.optim) that this checkout lacks


def public_names(module, curated=None):
    if curated is not None:
        return list(curated)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    is_package = hasattr(module, "__path__")
    out = []
    for name, obj in vars(module).items():
        if name.startswith("_") or inspect.ismodule(obj):
            continue
        if is_package:
            out.append(name)
        elif (inspect.isclass(obj) or inspect.isfunction(obj)) and \
                getattr(obj, "__module__", None) == module.__name__:
            out.append(name)
    return sorted(out, key=str.lower)


def first_paragraph(obj):
    doc = obj.__doc__ if isinstance(obj, type) or callable(obj) or inspect.ismodule(obj) else None
    if not isinstance(doc, str) or not doc.strip():
        return ""
    lines = []
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(_PROMPT):
            break
        lines.append(stripped)
    return " ".join(lines)


def signature(obj):
    op = getattr(obj, "op", None)
    args = getattr(op, "args", None)
    if isinstance(args, tuple) and all(isinstance(a, str) for a in args):
        return f"({', '.join(args)})"  # a formula-table op: one operand per formula name
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return _ADDRESS.sub("", sig)


def _members(cls):
    """Public attributes the class itself defines (not the inherited ones)."""
    return sorted((n for n in vars(cls) if not n.startswith("_")), key=str.lower)


def _markdown(text):
    """Escape < and > outside `code` spans, so that Markdown shows them as written."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _wrap(text):
    return textwrap.fill(text, width=100, initial_indent="  ", subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)


def _entry(qualname, name, obj, seen):
    """Markdown lines for one public name."""
    if id(obj) in seen and (callable(obj) or isinstance(obj, type)):
        return [f"- `{name}`: alias of `{seen[id(obj)]}`."]
    if callable(obj) or isinstance(obj, type):
        seen[id(obj)] = qualname
    if inspect.ismodule(obj):
        return [f"- `{name}`: the module `{obj.__name__}` (its own section)."]
    if inspect.isclass(obj):
        head = f"- `class {name}{signature(obj)}`"
    elif callable(obj):
        head = f"- `{name}{signature(obj)}`"
    else:
        text = _ADDRESS.sub("", repr(obj))
        if len(text) > 60 or "\n" in text:
            text = None
        kind = type(obj).__name__
        return [f"- `{name}`" + (f" = `{text}`" if text else "") + f" ({kind})"]
    lines = [head]
    para = first_paragraph(obj)
    if para:
        lines.append(_wrap(_markdown(para)))
    if inspect.isclass(obj):
        members = _members(obj)
        if members:
            lines.append(_wrap("Defines: " + ", ".join(f"`{m}`" for m in members) + "."))
    return lines


def render():
    """The text of docs/api.md."""
    import jitgrad  # noqa: F401  (attaches Tensor methods before anything is listed)
    modules = [(name, _import(name), curated) for name, curated in MODULES]
    out = ["# API reference",
           "",
           "Generated by `python docs/gen_api.py` from the docstrings; do not edit by hand",
           "(`tests/test_docs_api.py` fails when this file is out of date). Each entry",
           "gives a name's signature and the first paragraph of its docstring; the",
           "docstrings themselves have runnable examples (`help(jitgrad.tensor)`).",
           "The guides are listed in [index.md](index.md).",
           ""]
    out += [f"- [`{name}`](#{name.replace('.', '')})" for name, mod, _ in modules if mod is not None]
    out.append("")
    seen = {}
    for name, mod, curated in modules:
        if mod is None:
            continue
        out += [f"## {name}", ""]
        para = first_paragraph(mod)
        if para:
            out += [textwrap.fill(_markdown(para), width=100, break_long_words=False,
                                  break_on_hyphens=False), ""]
        for public in public_names(mod, curated):
            obj = getattr(mod, public)
            if name == "jitgrad.autograd" and public == "gradcheck" and inspect.ismodule(obj):
                obj = getattr(obj, "gradcheck")
            out += _entry(f"{name}.{public}", public, obj, seen)
        out.append("")
    text = "\n".join(out).rstrip("\n") + "\n"
    assert _PROMPT not in text, "api.md must not contain doctest prompts"
    return text


def main(argv=None):
    ap = argparse.ArgumentParser(description="Generate docs/api.md from jitgrad's docstrings.")
    ap.add_argument("--check", action="store_true", help="only check that docs/api.md is current")
    args = ap.parse_args(argv)
    return write_or_check(render(), OUTPUT, "docs/gen_api.py", args.check)


def write_or_check(text, output, script, check):
    """Write `text` to `output`, or with `check` only compare: 1 if it differs.
    Shared by the docs/ generators."""
    if check:
        try:
            with open(output) as f:
                current = f.read()
        except OSError:
            current = None
        if current != text:
            print(f"{output} is out of date: run python {script}", file=sys.stderr)
            return 1
        return 0
    with open(output, "w") as f:
        f.write(text)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))  # the checkout's jitgrad, without installing it
    sys.exit(main())
