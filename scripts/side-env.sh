# Sourced by scripts/saelens-env.sh and scripts/circuit-tracer-env.sh: the part both share of making an environment
# of its own for a tool we compare with, which reads PyTorch and the rest from the project's .venv (a .pth file adds
# .venv's site-packages after its own): one PyTorch on disk, the same build on both sides, nothing added to .venv.
#
#   side_env_open NAME VENV "PACKAGE==VERSION" DIST   checks .venv, takes NAME's lock (two test workers make it
#       once), exits 0 when VENV is already made for this .venv and holds DIST; otherwise makes VENV afresh with the
#       .pth and leaves $project_site and $stamp set for the caller, which installs and checks, then
#   side_env_close VENV                                marks VENV made.
PROJECT=.venv

side_env_open() {
  local name=$1 venv=$2 spec=$3 dist=$4
  if [ ! -x "$PROJECT/bin/python" ]; then
    echo "$name: $PROJECT is missing; run bash scripts/setup.sh first."
    exit 2
  fi
  local base system_site own_site
  base=$("$PROJECT/bin/python" -c 'import sys; print(sys._base_executable)')
  project_site=$(cd "$PROJECT" && "$PWD/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  system_site=$(grep -qs '^include-system-site-packages *= *true' "$PROJECT/pyvenv.cfg" && echo yes || echo no)
  stamp="$spec $base $project_site $system_site"
  exec 9>"/tmp/scratchformer-$name.lock"
  flock 9
  if [ -f "$venv/.made" ] && [ "$(cat "$venv/.made")" = "$stamp" ] \
    && "$venv/bin/python" -c "import importlib.metadata as m; m.version('$dist')" >/dev/null 2>&1; then
    exit 0
  fi
  rm -rf "$venv"
  if [ "$system_site" = yes ]; then  # .venv sees the base Python's packages (its PyTorch): so does this one
    "$base" -m venv --system-site-packages "$venv"
  else
    "$base" -m venv "$venv"
  fi
  own_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "import site; site.addsitedir('$project_site')" >"$own_site/zz_scratchformer_project_venv.pth"
}

side_env_close() {
  echo "$stamp" >"$1/.made"
}
