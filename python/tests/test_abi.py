# SPDX-License-Identifier: MIT
"""The ctypes mirror (moshpit/_abi.py) against include/moshpit.h: a C
program compiled against the header prints the size and offset of every
field the mirror declares, the size of each struct and the constants; the
field names are also read from the header text, in order, so a field the
mirror lacks fails here even where padding would hide it."""

import ctypes
import os
import re
import shutil
import subprocess

import pytest

from moshpit import _abi

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER_DIR = os.environ.get("MOSHPIT_INCLUDE", os.path.join(REPO, "include"))
HEADER = os.path.join(HEADER_DIR, "moshpit.h")

STRUCTS = {"moshpit_config_t": _abi.Config, "moshpit_round_t": _abi.Round}
CONSTANTS = [
    "MOSHPIT_KEY_BYTES", "MOSHPIT_KEY_TEXT_LEN", "MOSHPIT_CERT_BYTES",
    "MOSHPIT_CERT_TEXT_LEN", "MOSHPIT_OK", "MOSHPIT_EINVAL", "MOSHPIT_ENOMEM",
    "MOSHPIT_ETIMEDOUT", "MOSHPIT_ECLOSED", "MOSHPIT_EPROTO",
    "MOSHPIT_ECRYPTO", "MOSHPIT_EPEERAUTH", "MOSHPIT_ESYS",
    "MOSHPIT_ENOSTATE", "MOSHPIT_ECOUNT", "MOSHPIT_EBUSY", "MOSHPIT_AGG_MEAN",
    "MOSHPIT_AGG_TRIMMED_MEAN", "MOSHPIT_AGG_CENTERED_CLIP",
    "MOSHPIT_COMPRESS_NONE", "MOSHPIT_COMPRESS_FP16", "MOSHPIT_COMPRESS_BF16",
    "MOSHPIT_COMPRESS_INT8", "MOSHPIT_COMPRESS_INT4", "MOSHPIT_SHM_AUTO",
    "MOSHPIT_SHM_OFF",
    "MOSHPIT_LOG_ERROR", "MOSHPIT_LOG_WARN", "MOSHPIT_LOG_INFO",
    "MOSHPIT_LOG_DEBUG",
]

pytestmark = pytest.mark.skipif(
    not os.path.exists(HEADER), reason="moshpit.h not found (set MOSHPIT_INCLUDE)"
)


def header_fields(tag):
    """Field names of `typedef struct <tag> {...}` in declaration order."""
    text = open(HEADER).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    m = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*\w+\s*;" % tag, text, re.S)
    assert m, "struct %s not found in %s" % (tag, HEADER)
    names = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
        if fp:  # function pointer or pointer to array
            names.append(fp.group(1))
            continue
        decl = re.sub(r"\[[^\]]*\]", "", decl)
        parts = decl.split(",")
        names.append(re.findall(r"\w+", parts[0])[-1])
        names.extend(re.findall(r"\w+", p)[-1] for p in parts[1:])
    return names


@pytest.mark.parametrize("tag,ctype", [("moshpit_config", _abi.Config),
                                       ("moshpit_round", _abi.Round)])
def test_field_names_in_header_order(tag, ctype):
    assert [n for n, _ in ctype._fields_] == header_fields(tag)


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <moshpit.h>",
             "int main(void) {"]
    for cname, ctype in STRUCTS.items():
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (cname, cname))
        for field, _ in ctype._fields_:
            lines.append(
                'printf("%s.%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                % (cname, field, cname, field, cname, field)
            )
    for c in CONSTANTS:
        lines.append('printf("%s %%lld\\n", (long long)(%s));' % (c, c))
    lines += ["return 0;", "}"]
    d = tmp_path_factory.mktemp("abi")
    src, exe = d / "layout.c", d / "layout"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-I", HEADER_DIR, str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True)
    table = {}
    for line in out.stdout.splitlines():
        key, *nums = line.split()
        table[key] = tuple(int(x) for x in nums)
    return table


@pytest.mark.parametrize("cname", sorted(STRUCTS))
def test_struct_layout_matches_header(c_layout, cname):
    ctype = STRUCTS[cname]
    assert c_layout[cname] == (ctypes.sizeof(ctype),)
    for field, _ in ctype._fields_:
        desc = getattr(ctype, field)
        assert c_layout["%s.%s" % (cname, field)] == (desc.offset, desc.size), field


def test_constants_match_header(c_layout):
    for c in CONSTANTS:
        name = c[len("MOSHPIT_"):]
        assert getattr(_abi, name) == c_layout[c][0], c
