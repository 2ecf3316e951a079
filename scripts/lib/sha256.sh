# Shared by the model installers: `file_sha256 FILE` prints the file's sha256, via sha256sum or, where that is
# missing, python3; `committed_sha256 CHECKSUMS NAME` prints NAME's hash in a `sha256sum -c` file. Source it; it
# defines functions only.

committed_sha256() {
    awk -v name="$2" '$2 == name || $2 == "*" name { print $1; exit }' "$1"
}

file_sha256() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        python3 - "$1" <<'PY'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print(h.hexdigest())
PY
    fi
}
