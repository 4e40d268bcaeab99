#!/usr/bin/env bash
# crfx's man page (troff, section 1) or its bash completion, written from the tool's own help, so
# that both name what the binary has: the commands from `crfx --help`, each command's options
# from `crfx COMMAND --help` (cxxopts' tables), the algorithms from `crfx train --algo list`.
#   scripts/crfx-docs.sh man CRFX > crfx.1          (man1; `man -l crfx.1` shows it)
#   scripts/crfx-docs.sh completion CRFX > crfx     (share/bash-completion/completions/crfx)
# `cmake --install` runs both (CMakeLists.txt); tests/test_cli_habits.cpp checks them.
set -euo pipefail
mode=${1:-} crfx=${2:-}
if [[ ($mode != man && $mode != completion) || -z $crfx ]]; then
  echo "usage: $0 man|completion CRFX_BINARY" >&2
  exit 2
fi

# The commands: the "commands:" lines of `crfx --help` that name a word (not --version).
mapfile -t commands < <("$crfx" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
if ((${#commands[@]} == 0)); then
  echo "$0: no commands in '$crfx --help'" >&2
  exit 1
fi
algorithms=$("$crfx" train --algo list | awk -F'\t' '/^  [a-z]/ { sub(/^  /, "", $1); printf "%s ", $1 }')

# One command's --help as records, fields separated by US (\037, not whitespace: empty fields
# stay): "desc US line", "usage US line", and per option "opt US -m US --model US arg US text"
# with the description's continuation lines joined.
help_records() {
  "$crfx" "$1" --help | awk '
    BEGIN { US = "\037" }
    function flush() { if (long != "") print "opt" US short US long US arg US text; long = "" }
    state == 0 && /^Usage:/ { state = 1; next }
    state == 0 { print "desc" US $0; next }
    state == 1 && NF { sub(/^ +/, ""); print "usage" US $0; state = 2; next }
    state == 2 && (/^  -[^-]/ || /^      --/) {
      flush()
      line = $0; sub(/^ +/, "", line)
      short = ""
      if (line ~ /^-[^-], /) { short = substr(line, 1, 2); line = substr(line, 5) }
      match(line, /^--[A-Za-z0-9-]+/); long = substr(line, 1, RLENGTH); line = substr(line, RLENGTH + 1)
      arg = ""
      if (line ~ /^ arg( |$)/) { arg = "arg"; line = substr(line, 5) }
      sub(/^ +/, "", line); text = line
      next
    }
    state == 2 && NF { line = $0; sub(/^ +/, "", line); sub(/ +$/, "", text); text = text " " line }
    END { flush() }'
}

man_page() {
  version=$("$crfx" --version | head -n 1)
  esc() { sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
  cat <<EOF
.TH CRFX 1 "" "$(printf '%s' "$version" | esc)" "User Commands"
.SH NAME
crfx \\- linear\\-chain CRF trainer and tagger
.SH SYNOPSIS
.B crfx
.I COMMAND
.RI [ options ]
.br
.B crfx
.I COMMAND
.B \\-\\-help
.br
.B crfx \\-\\-version
.SH DESCRIPTION
crfx trains linear\\-chain conditional random fields from CoNLL columns (with a CRF++ feature
template) or CRFsuite attribute files, labels data with a trained model, and scores labelled
output like conlleval. Every command prints its options with \\fB\\-\\-help\\fR; this page is
generated from those tables.
.SH COMMANDS
EOF
  "$crfx" --help |
    awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { name = $1; sub(/^  [a-z]+ +/, ""); print name "\t" $0 }' |
    while IFS=$'\t' read -r name text; do
      printf '.TP\n.B %s\n%s\n' "$(printf '%s' "$name" | esc)" "$(printf '%s' "$text" | esc)"
    done
  for cmd in "${commands[@]}"; do
    printf '.SH "CRFX %s"\n' "$(printf '%s' "$cmd" | tr a-z A-Z)"
    desc="" usage=""
    opts=()
    while IFS=$'\037' read -r kind a b c d; do
      case $kind in
        desc) desc+="$a " ;;
        usage) usage=$a ;;
        opt) opts+=("$a"$'\037'"$b"$'\037'"$c"$'\037'"$d") ;;
      esac
    done < <(help_records "$cmd")
    printf '.B %s\n.br\n' "$(printf '%s' "$usage" | esc)"
    printf '%s\n' "$(printf '%s' "$desc" | esc)"
    printf '.SS Options\n'
    for o in "${opts[@]}"; do
      IFS=$'\037' read -r short long arg text <<<"$o"
      head="\\fB$(printf '%s' "$long" | esc)\\fR"
      [[ -n $short ]] && head="\\fB$(printf '%s' "$short" | esc)\\fR, $head"
      [[ -n $arg ]] && head+=" \\fIvalue\\fR"
      printf '.TP\n%s\n%s\n' "$head" "$(printf '%s' "$text" | esc)"
    done
    if [[ $cmd == train ]]; then
      printf '.SS Algorithms (\\fBcrfx train \\-\\-algo list\\fR)\n'
      "$crfx" train --algo list | awk -F'\t' '/^  [a-z]/ { sub(/^  /, "", $1); print $1 "\t" $2 }' |
        while IFS=$'\t' read -r name text; do
          printf '.TP\n.B %s\n%s\n' "$(printf '%s' "$name" | esc)" "$(printf '%s' "$text" | esc)"
        done
    fi
  done
  cat <<'EOF'
.SH "EXIT STATUS"
.TP
.B 0
success
.TP
.B 1
failure: bad input (the file and line are named), I/O, numerical
.TP
.B 2
a command line that cannot run: an unknown option, algorithm or mode, a value out of range
(checked before anything is read)
.TP
.B 3
crfx train stopped by SIGINT or SIGTERM, with the model of its last iteration written
.SH "SEE ALSO"
README.md of the crfx sources. \fBcrfx learn\fR takes CRFsuite's \fBlearn\fR command line; other
CRFsuite, CRF++ (\fBcrf_learn\fR, \fBcrf_test\fR) and conlleval options are refused with the
crfx option that does the same.
EOF
}

# Non-ASCII characters of the help (·, ‖, →) as groff's \[uXXXX], so that any troff reads the page
# (man-db's preconv would do it; a bare groff warns); without perl they stay UTF-8.
ascii_troff() {
  if command -v perl >/dev/null; then perl -CS -pe 's/([^\x00-\x7f])/sprintf("\\[u%04X]", ord($1))/ge'; else cat; fi
}

if [[ $mode == man ]]; then
  man_page | ascii_troff
  exit 0
fi

# ---- bash completion ----
cat <<EOF
# bash completion for crfx, generated by scripts/crfx-docs.sh from crfx's own help.
_crfx() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} words="" opts=""
  if ((COMP_CWORD == 1)); then
    COMPREPLY=(\$(compgen -W "${commands[*]} --help --version" -- "\$cur"))
    return
  fi
  case \${COMP_WORDS[1]} in
EOF
for cmd in "${commands[@]}"; do
  opts="" choices=""
  while IFS=$'\037' read -r kind short long arg text; do
    [[ $kind == opt ]] || continue
    opts+="${short:+$short }$long "
    [[ -n $arg ]] || continue
    # Choices: the first "a | b | c" of the description; the algorithms for --algo.
    words=$(printf '%s' "$text" | grep -oE '[a-z0-9-]+( \| [a-z0-9-]+)+' | head -n 1 | sed 's/ | / /g' || true)
    [[ $long == --algo ]] && words="list $algorithms"
    [[ -n $words ]] && choices+="        ${short:+$short|}$long) words=\"${words% }\" ;;"$'\n'
  done < <(help_records "$cmd")
  printf '    %s)\n      opts="%s"\n' "$cmd" "${opts% }"
  if [[ -n $choices ]]; then
    printf '      case $prev in\n%s      esac\n' "$choices"
  fi
  printf '      ;;\n'
done
cat <<'EOF'
  esac
  if [[ -n $words ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _crfx crfx
EOF
