# Shared by the test runners: `pinned_venv VENV REQUIREMENTS` makes (or re-makes) the Python environment VENV
# holding exactly the pinned packages of the requirements file, once: a stamp records what it was made from, and
# PyPI is reached only when the environment lacks them. Source it; it defines functions only (and uses `die`).

pinned_venv() {
    local venv="$1" requirements="$2"
    local stamp="$venv/.attest-requirements"
    if [[ ! -x "$venv/bin/python" ]] || ! cmp -s "$requirements" "$stamp"; then
        printf 'making %s from %s\n' "$venv" "$(basename "$requirements")" >&2
        python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" ||
            die "pip install of the pinned packages of $requirements failed"
        cp "$requirements" "$stamp"
    fi
}
