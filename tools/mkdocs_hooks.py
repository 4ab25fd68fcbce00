"""The reference pages that must not drift from the code, generated from it.

A page holds a generated block between two marker lines, ``<!-- generated: KIND -->`` and
``<!-- end generated: KIND -->``:

* ``<!-- generated: cli -->``: every ``gpu-share`` command and flag, read from the
  argparse parser (``cdk_gpu_share.cli.build_parser``).
* ``<!-- generated: config -->``: every field of ``platform.yaml``, read from the JSON
  Schema the library builds (``cdk_gpu_share.core.configuration.schema.platform_schema``).

The blocks are committed, so the references read in the repository without a docs build:
``python tools/mkdocs_hooks.py`` rewrites them from the code (``--check`` only says which page
is out of date; a test runs it). As an MkDocs hook, the site is built from the code too.

A field with no description anywhere fails (the build, ``mkdocs build --strict`` in CI, and the
rewrite), so a new field cannot ship undocumented.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # document the checkout being built

#: A generated block: its opening marker, its text, its closing marker.
BLOCK = re.compile(r"^<!-- generated: (\w+) -->\n(.*?)^<!-- end generated: \1 -->$", re.M | re.S)
#: The pages that hold generated blocks.
PAGES = ("docs/cli.md", "docs/configuration.md", "docs/development.md")
WIDTH = 96


class GeneratedDocsError(Exception):
    """A generated page cannot be written (a field or flag without a description)."""


def generated(kind: str, where: str) -> str:
    """The text of the generated block ``kind``."""
    if kind == "cli":
        return cli_reference()
    if kind == "config":
        return config_reference()
    if kind == "imports":
        return imports_diagram()
    raise GeneratedDocsError(f"{where}: unknown generated block {kind!r}")


def imports_diagram() -> str:
    """The parts of the package and the parts each imports, read from the source
    (``tools/import_graph.py``), as a text block."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import import_graph
    finally:
        sys.path.pop(0)
    _, edges = import_graph.graph(ROOT / "src")
    return "```text\n" + import_graph.diagram(edges) + "\n```"


def regenerate(markdown: str, where: str) -> str:
    """``markdown`` with each generated block written afresh from the code."""
    def replace(match: re.Match) -> str:
        kind = match.group(1)
        return f"<!-- generated: {kind} -->\n{generated(kind, where).rstrip()}\n<!-- end generated: {kind} -->"

    return BLOCK.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return regenerate(markdown, page.file.src_path)


def stale_pages(root: Path = ROOT, *, write: bool = False) -> list[str]:
    """The pages of :data:`PAGES` whose generated blocks differ from the code (rewritten when ``write``)."""
    stale = []
    for name in PAGES:
        path = root / name
        text = path.read_text(encoding="utf-8")
        fresh = regenerate(text, name)
        if fresh != text:
            stale.append(name)
            if write:
                path.write_text(fresh, encoding="utf-8")
    return stale


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = stale_pages(write=not check)
    for name in stale:
        print(f"{name}: {'out of date' if check else 'rewritten'}")
    return 1 if check and stale else 0


#: A Sphinx role as it comes out of a docstring rendered as Markdown: ``:class:`~a.b.C``` becomes
#: ``:class:<code>~a.b.C</code>``.
ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|data|exc|obj|const):<code>~?([^<]*)</code>")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Docstrings use Sphinx roles; show their target as code (the last name for ``~a.b.C``)."""

    def code(match: re.Match) -> str:
        target = match.group(1)
        if "<code>~" in match.group(0):
            target = target.rsplit(".", 1)[-1]
        return f"<code>{target}</code>"

    return ROLE.sub(code, html)


# ----------------------------------------------------------------------------- CLI


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in --help order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or (
                    "{" + ",".join(action.choices) + "}" if action.choices else action.dest.upper())
                name += f" {metavar}"
        else:
            name = action.metavar or action.dest
        if not action.help:
            raise GeneratedDocsError(f"{parser.prog}: {name} has no help text")
        notes = []
        if action.required and action.option_strings:
            notes.append("required")
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        help_text = action.help % {"default": action.default, "prog": parser.prog} if "%(" in action.help else action.help
        note = f" ({'; '.join(notes)})" if notes else ""
        rows.append(f"| `{_esc(name)}` | {_esc(help_text)}{note} |")
    return rows


def _command_section(path: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    subs = list(_subcommands(parser))
    out = [f"{'#' * level} `{path}`", ""]
    if summary:
        out += [summary[0].upper() + summary[1:] + ".", ""]
    out += ["```text", _usage(parser), "```", ""]
    if parser.description:
        out += [" ".join(parser.description.split()), ""]
    rows = _flag_rows(parser)
    if rows:
        out += ["| argument | meaning |", "|---|---|", *rows, ""]
    for name, help_text, sub in subs:
        out += _command_section(f"{path} {name}", help_text, sub, min(level + 1, 4))
    return out


def cli_reference() -> str:
    from cdk_gpu_share.cli import build_parser

    parser = build_parser()
    subs = list(_subcommands(parser))
    out = ["| command | what it does |", "|---|---|"]
    for name, help_text, _ in subs:
        anchor = f"gpu-share-{name}"
        out.append(f"| [`gpu-share {name}`](#{anchor}) | {_esc(help_text)} |")
    out += ["", "```text", _usage(parser), "```", ""]
    rows = _flag_rows(parser)
    if rows:
        out += ["| argument | meaning |", "|---|---|", *rows, ""]
    for name, help_text, sub in subs:
        out += _command_section(f"gpu-share {name}", help_text, sub, 2)
    return "\n".join(out)


# ----------------------------------------------------------------------------- config

#: Fields that the JSON Schema lists without a description (it describes a section's keys,
#: not always the keys of the mappings inside it).
EXTRA_FIELDS: dict[str, dict[str, str]] = {
    "hyperpod.priority_classes[]": {
        "name": "Name of the priority class (a Kubernetes name); workloads select it with the label"
        " `kueue.x-k8s.io/priority-class`.",
        "weight": "Weight of the class, 0 to 100: higher is scheduled (and preempts) first.",
    },
    "inference.endpoints[]": {
        "name": "Base name of the endpoint's SageMaker resources: lower-case letters, digits and hyphens,"
        " at most 40 characters.",
        "instance_type": "A SageMaker instance type with MIG-capable GPUs (8 GPUs each).",
        "instance_count": "Instances of the partitioned endpoint. Default: 1.",
        "layout": "The MIG partitions of every GPU: a preset (`gpu-share mig layouts`) or a list of profiles."
        " Changing it creates a new endpoint.",
        "models": "The models served from the partitions (below).",
        "whole_gpu": "A second endpoint without partitions, for the models that give `gpus`:"
        " `{instance_type, instance_count}` (count default 1).",
    },
    "inference.endpoints[].models[]": {
        "name": "Model name: lower-case letters, digits and hyphens (endpoint name + model name at most 55).",
        "image": "The inference container image (an ECR URI).",
        "model_data_url": "S3 URL of the model artifact. Default: none (the image carries the model).",
        "environment": "Environment variables of the container (string values, at most 16). Visible to anyone"
        " who may describe the model: no secrets.",
        "profile": "The MIG profile one copy occupies; must be in the endpoint's layout. Not with `gpus`.",
        "gpus": "Whole GPUs one copy needs; the model goes on the endpoint's `whole_gpu` variant. Not with"
        " `profile`.",
        "copies": "A number (fixed copies) or `{initial, min, max}`; autoscaled on invocations per copy when"
        " `max > min`. Default: 1.",
        "memory_mb": "Host memory one copy needs, in MB (required; at least 128). Shared by all partitions of an"
        " instance.",
        "cpus": "Host CPU cores one copy needs (at least 0.25). Default: none.",
        "team": "The owning team (one of the config's teams). Default: none.",
        "invocations_per_copy": "Autoscaling target of SageMaker's InvocationsPerCopy metric. Default: 10.",
        "network_isolation": "The container gets no network access. Default: true.",
    },
    "inference.vpc": {
        "subnet_ids": "Subnets the models run in (subnet-...).",
        "security_group_ids": "Security groups of the models (sg-...).",
    },
    "inference": {
        "endpoints": "The partitioned endpoints (below).",
        "vpc": "Run the models in these subnets: `{subnet_ids, security_group_ids}`. Default: no VPC.",
        "kms_key_arn": "KMS key of the model data in S3; the execution role may decrypt with it. Default: none.",
    },
    "alerts": {
        "emails": "Addresses subscribed to a new KMS-encrypted, SSL-only SNS topic (at most 20). Not with"
        " `topic_arn`.",
        "topic_arn": "An existing SNS topic instead (subscribe people where it is defined).",
    },
}


#: Types of the model fields (the schema lists their names only).
MODEL_TYPES = {
    "name": "string", "image": "string", "model_data_url": "string (s3://...)",
    "environment": "mapping: name -> string", "profile": "string (a MIG profile)", "gpus": "whole number >= 1",
    "copies": "whole number >= 1 or mapping", "memory_mb": "whole number >= 128", "cpus": "number >= 0.25",
    "team": "string", "invocations_per_copy": "number > 0", "network_isolation": "true \\| false",
}


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _type_text(schema: dict, node: dict) -> str:
    node = _resolve(schema, node)
    if "enum" in node:
        values = node["enum"]
        if len(values) > 8:
            return f"one of {len(values)} names (see `gpu-share schema`)"
        return " \\| ".join(f"`{v}`" for v in values)
    if "oneOf" in node:
        return " or ".join(_type_text(schema, alt) for alt in node["oneOf"])
    kind = node.get("type")
    if kind == "integer" or kind == "number":
        lo, hi = node.get("minimum"), node.get("maximum")
        word = "whole number" if kind == "integer" else "number"
        if lo is not None and hi is not None and hi < 2**31 - 1:
            return f"{word} {lo:g}..{hi:g}"
        if lo is not None:
            return f"{word} >= {lo:g}"
        return word
    if kind == "string":
        return "string (an e-mail address)" if node.get("format") == "email" else "string"
    if kind == "boolean":
        return "true \\| false"
    if kind == "array":
        item = node.get("items", {})
        return f"list of {_type_text(schema, item)}" if item.get("type") != "object" else "list of mappings"
    if kind == "object":
        if "propertyNames" in node and "additionalProperties" in node and not node.get("properties"):
            extra = node["additionalProperties"]
            names = node["propertyNames"]
            key = "MIG profile" if any(str(n).startswith("mig-") for n in names.get("enum", ())) else "instance type"
            if isinstance(extra, dict) and "$ref" in extra:
                return f"mapping: {key} -> count or amount"
            return f"mapping: {key} -> {_type_text(schema, extra)}"
        if node.get("additionalProperties") and not node.get("properties"):
            return "mapping: instance type -> count or amount"
        return "mapping"
    return "value"


def _sections(schema: dict) -> Iterator[tuple[str, dict, set[str]]]:
    """(path, object node, required keys) of every object in the schema, depth first."""

    def walk(path: str, node: dict) -> Iterator[tuple[str, dict, set[str]]]:
        node = _resolve(schema, node)
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            yield from walk(path + "[]", node["items"])
            return
        props = node.get("properties")
        if node.get("type") == "object" and props:
            yield path, node, set(node.get("required", ()))
            for key, sub in props.items():
                yield from walk(f"{path}.{key}" if path else key, sub)
        elif "oneOf" in node:
            for alt in node["oneOf"]:
                if "$ref" in alt:
                    yield from walk(path, alt)

    yield from walk("", schema)


def _model_keys() -> set[str]:
    import cdk_gpu_share.inference.config as IC

    return set(IC._MODEL_KEYS)


def config_reference() -> str:
    from cdk_gpu_share.core.configuration.schema import platform_schema

    schema = platform_schema()
    sections = list(_sections(schema))
    # The schema names the model keys (propertyNames) but does not describe them.
    paths = [path for path, _, _ in sections]
    models = "inference.endpoints[].models[]"
    if models not in paths:
        documented = [k for k in EXTRA_FIELDS[models] if k in _model_keys()]
        node = {"type": "object", "properties": {k: {} for k in documented + sorted(_model_keys() - set(documented))}}
        sections.insert(paths.index("inference.endpoints[]") + 1, (models, node, {"name", "image", "memory_mb"}))
    amount = schema["$defs"]["amount"]
    sections.insert(2, ("teams[].guarantee.<instance type>", amount, set()))
    out: list[str] = []
    for path, node, required in sections:
        out += [f"## `{path}`" if path else "## Top level", ""]
        if path.endswith("<instance type>"):
            out += ["A value of `guarantee` or `borrow_limit`: a whole number of instances (`ml.g5.xlarge: 1`),"
                    " or a mapping of the fields below (HyperPod; fair-share `borrow_limit` takes `instances`"
                    " or `accelerators`).", ""]
        if node.get("description") and path:
            out += [node["description"], ""]
        out += ["| field | type | required | default | description |", "|---|---|---|---|---|"]
        extra = EXTRA_FIELDS.get(path, {})
        if path.endswith("<instance type>"):
            extra = {}
        for key, sub in node["properties"].items():
            sub_node = _resolve(schema, sub) if sub else {}
            desc = sub.get("description") or sub_node.get("description") or extra.get(key)
            if not desc:
                raise GeneratedDocsError(f"platform.yaml field {path + '.' if path else ''}{key} has no description")
            default = sub.get("default", sub_node.get("default"))
            default_text = f"`{json.dumps(default)}`" if default is not None else ""
            kind = _type_text(schema, sub) if sub else MODEL_TYPES.get(key, "")
            out.append(f"| `{key}` | {kind} | {'yes' if key in required else ''} | {default_text} | {_esc(desc)} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
