"""JUnit XML: one testcase per rule per kernel or schedule, failed where that pair has findings.

Rules that did not run become skipped testcases carrying the reason.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..findings import CheckResult, Severity

# characters XML 1.0 cannot carry at all, not even escaped; contract names can hold them ("\u0001")
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", text)


def render_junit(result: CheckResult, tool: str = "wireup check") -> str:
    subjects = result.subjects
    suite = ET.Element("testsuite", name=tool)
    total = failures = skipped = 0
    by_pair: dict[tuple[str, str], list] = {}
    for f in result.findings:
        by_pair.setdefault((f.rule, f.subject or "contracts"), []).append(f)
    # a LOAD_ERROR finding comes from no rule that ran: the loader stopped the check (one testcase per file)
    unran = [r for r in dict.fromkeys(f.rule for f in result.findings) if r not in result.ran]
    for rule_id in (*result.ran, *unran):
        names = list(dict.fromkeys([*subjects.get(rule_id, []), *(s for r, s in by_pair if r == rule_id)]))
        for subject in names or ["contracts"]:
            case = ET.SubElement(suite, "testcase", classname=f"wireup.{rule_id}", name=f"{rule_id}[{subject}]")
            total += 1
            found = by_pair.get((rule_id, subject), [])
            errors = [f for f in found if f.severity is Severity.ERROR]
            if errors:
                failures += 1
                fail = ET.SubElement(case, "failure", message=errors[0].message, type=rule_id)
                fail.text = "\n".join(f"{f.location}: {f.message}" for f in found)
            elif found:
                out = ET.SubElement(case, "system-out")
                out.text = "\n".join(f"{f.location}: {f.severity.value}: {f.message}" for f in found)
    for nr in result.not_run:
        case = ET.SubElement(suite, "testcase", classname=f"wireup.{nr.rule}", name=nr.rule)
        ET.SubElement(case, "skipped", message=f"not run: {nr.reason}")
        total += 1
        skipped += 1
    suite.set("tests", str(total))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    for el in suite.iter():
        el.attrib = {k: _xml(v) for k, v in el.attrib.items()}
        if el.text:
            el.text = _xml(el.text)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
