"""SARIF 2.1.0 with rule metadata (ID, purpose, category, default level) for code-scanning UIs."""

from __future__ import annotations

import json
from urllib.parse import quote

from ..findings import LOAD_ERROR, LOAD_ERROR_PURPOSE, CheckResult, Severity

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
INFORMATION_URI = "https://github.com/wireup-audit/wireup"
#: each rule's helpUri is its section of the rules page (docs/rules.md, generated from the fixture pairs)
DOCS_URI = f"{INFORMATION_URI}/blob/main/docs/rules.md"


def _help(rule, example: dict | None) -> dict:
    """The rule's help for code-scanning UIs: its purpose and, for a static rule, its fixture example."""
    text = [f"{rule.id}: {rule.purpose}"]
    md = [f"**{rule.id}** ({rule.category}, {rule.severity.value}): {rule.purpose}"]
    if example:
        why = " ".join(example.get("why", []))
        if why:
            text.append(f"Example: {why}")
            md.append(f"Example: {why}")
        md += ["", "```diff", *example.get("change", []), "```", "", "finds:", "", "```", *example.get("findings", []), "```"]
        text += [*example.get("findings", [])]
    return {"text": "\n".join(text), "markdown": "\n".join(md)}
SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render_sarif(result: CheckResult, tool: str = "wireup check") -> str:
    from .. import __version__
    from ..rules import iter_rules

    from ..rules.examples import anchor, load_examples

    rules = list(iter_rules())
    index = {r.id: i for i, r in enumerate(rules)}
    examples = load_examples()
    driver = {
        "name": "wireup",
        "version": __version__,
        "informationUri": INFORMATION_URI,
        "rules": [
            {
                "id": r.id,
                "name": "".join(part.capitalize() for part in r.id.split("_")),
                "shortDescription": {"text": r.purpose},
                "fullDescription": {"text": r.purpose},
                "helpUri": f"{DOCS_URI}#{anchor(r.id)}",
                "help": _help(r, examples.get(r.id)),
                "defaultConfiguration": {"level": _LEVEL[r.severity]},
                "properties": {"category": r.category, "tags": [r.category]},
            }
            for r in rules
        ],
    }
    if result.load_failed:
        # the loader's verdict is no rule of the registry, but a result needs a rule to point at
        index[LOAD_ERROR] = len(driver["rules"])
        driver["rules"].append(
            {
                "id": LOAD_ERROR,
                "name": "LoadError",
                "shortDescription": {"text": LOAD_ERROR_PURPOSE},
                "fullDescription": {"text": LOAD_ERROR_PURPOSE},
                "defaultConfiguration": {"level": "error"},
                "properties": {"category": "schema", "tags": ["schema"]},
            }
        )
    results = []
    for f in result.findings:
        res: dict = {
            "ruleId": f.rule,
            "level": _LEVEL[f.severity],
            "message": {"text": f.message},
        }
        if f.rule in index:
            res["ruleIndex"] = index[f.rule]
        if f.file:
            # a SARIF uri is a URI reference: spaces, "%", "#" and non-ASCII in file names are percent-encoded
            loc: dict = {"artifactLocation": {"uri": quote(f.file, safe="/"), "uriBaseId": "SRCROOT"}}
            if f.line:
                loc["region"] = {"startLine": f.line}
            res["locations"] = [{"physicalLocation": loc}]
        if f.subject:
            res["properties"] = {"subject": f.subject, "key": f.key}
        results.append(res)
    for f, reason in result.suppressed:  # reviewed findings: code scanning shows them as suppressed, with why
        res = {"ruleId": f.rule, "level": _LEVEL[f.severity], "message": {"text": f.message},
               "suppressions": [{"kind": "inSource", "justification": reason}]}  # fmt: skip
        if f.rule in index:
            res["ruleIndex"] = index[f.rule]
        if f.file:
            loc = {"artifactLocation": {"uri": quote(f.file, safe="/"), "uriBaseId": "SRCROOT"}}
            if f.line:
                loc["region"] = {"startLine": f.line}
            res["locations"] = [{"physicalLocation": loc}]
        results.append(res)
    notifications = [
        {"level": "note", "message": {"text": f"{n.rule} not run: {n.reason}"}, "descriptor": {"id": n.rule}}
        for n in result.not_run
    ]
    if result.load_failed:
        # the run still succeeded in the SARIF sense: it reports its findings. GitHub code scanning
        # processes no result of a run marked executionSuccessful false (github/codeql-action#1316,
        # #1393), which would hide exactly the annotations a load error needs
        n = len(result.findings)
        notifications.append({"level": "error", "message": {"text": f"{n} load error(s); nothing was checked."}, "descriptor": {"id": LOAD_ERROR}})
    doc = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {"SRCROOT": {"uri": "./"}},
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"
