#!/usr/bin/env python3
"""Generate pystrobe's man page and shell completions from the built binary.

    gen_docs.py man  BINARY docs/cli.md   > pystrobe.1
    gen_docs.py bash BINARY               > pystrobe (bash completion)
    gen_docs.py zsh  BINARY               > _pystrobe (zsh completion)

The commands come from `pystrobe help`, each command's options from
`pystrobe COMMAND --help`: the texts the user sees, so an option added there
reaches the man page and the completions with no edit here. The rest of the
man page (behaviour, output formats, exit statuses) is docs/cli.md turned
into roff; its table of options is left out, --help gives them.

--help texts are read as: an unindented line ending in ":" starts a group,
unless it ends a sentence the line before began; an option line starts
with two spaces and "-x, --long ARG" or "--long ARG", then two or more
spaces and the first line of its description; deeper-indented lines
continue it. A command's last usage word names what follows its options:
PID completes Python pids, anything else file names.
"""
import re
import subprocess
import sys

OPTION_RE = re.compile(r"^ {2,6}(?:(-[A-Za-z0-9]), )?(--[a-z0-9][a-z0-9-]*)(?: ([A-Z][A-Z_]*))?"
                       r"(?: {2,}(\S.*))?$")
COMMAND_RE = re.compile(r"^  ([a-z][a-z-]*)((?:,? [^ ].*?)?)(?: {2,}(\S.*))?$")
# An argument of one of these names is a file name (completion).
FILE_ARGS = {"FILE", "PATH", "BASELINE", "DIR"}


def run_help(binary, *args):
    out = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         check=True, timeout=60)
    return out.stdout.decode()


class Option:
    def __init__(self, short, long, arg, text, section):
        self.short, self.long, self.arg = short, long, arg
        self.text = [text] if text else []
        self.section = section


def parse_options(help_text):
    """The options of one --help text, in order, with their descriptions."""
    options, section, last, prev = [], None, None, ""
    for line in help_text.splitlines():
        # "Async-aware (CPython 3.14+):", "py-spy's names and habits:"; not
        # "...with their\noptions:", the end of a sentence.
        sentence_goes_on = re.match(r"^\S.*[^.:]$", prev) and not prev.startswith("usage:")
        prev = line
        if re.match(r"^\S.*:$", line) and not sentence_goes_on:
            section, last = line[:-1], None
            continue
        m = OPTION_RE.match(line)
        if m:
            last = Option(m.group(1), m.group(2), m.group(3), m.group(4), section)
            options.append(last)
        elif last and line.startswith("     ") and line.strip():
            last.text.append(line.strip())
        else:
            last = None
    if not any(o.long == "--help" for o in options):
        options.append(Option("-h", "--help", None, "this text", None))
    return options


def usage_lines(help_text):
    """The usage lines at the top of a --help text, without 'usage: '; a
    deeper-indented line continues the one above."""
    lines = []
    for line in help_text.splitlines():
        m = re.match(r"^(?:usage:| {6}) (pystrobe .*)$", line)
        if m:
            lines.append(m.group(1).strip())
        elif lines and re.match(r"^ {8,}\S", line):
            lines[-1] += " " + line.strip()
        else:
            break
    return lines


def parse_commands(help_text):
    """[(name, synopsis, description)] from the Commands: section of `pystrobe help`."""
    cmds, inside, last = [], False, None
    for line in help_text.splitlines():
        if line == "Commands:":
            inside = True
            continue
        if not inside:
            continue
        if not line.strip():
            break
        m = COMMAND_RE.match(line)
        if m and not line.startswith("   "):
            last = [m.group(1), (m.group(1) + m.group(2)).strip(), m.group(3) or ""]
            cmds.append(last)
        elif last and line.strip():
            last[2] = (last[2] + " " + line.strip()).strip()
    # "version, --version": the command name is the first word.
    for c in cmds:
        c[1] = c[1].split(",")[0] if c[1].startswith(c[0] + ",") else c[1]
    return [tuple(c) for c in cmds]


def takes_pid(name, texts):
    """Whether the command's operand (its usage lines' last word) is a PID."""
    own = [u for u in usage_lines(texts.get(name, "")) if u.startswith("pystrobe %s " % name)]
    return any(u.split()[-1] == "PID" for u in own)


def collect(binary):
    """(commands, {command: [Option]}, {command: help text})."""
    main_help = run_help(binary, "help")
    commands = parse_commands(main_help)
    options, texts = {}, {"": main_help}
    for name, _, _ in commands:
        if name in ("help", "version"):
            continue
        text = run_help(binary, name, "--help")
        texts[name] = text
        options[name] = parse_options(text)
    return commands, options, texts


# --- man page -----------------------------------------------------------------

def roff_escape(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    # Plain ASCII out, whatever troff's input encoding: \[uXXXX] for the rest.
    text = "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)
    # A line starting with . or ' would be a request.
    return re.sub(r"^([.'])", r"\\&\1", text)


def md_inline(text):
    """Markdown inline text (code, bold, links) to roff."""
    out, pos = [], 0
    for m in re.finditer(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\([^)]+\)", text):
        out.append(roff_escape(text[pos:m.start()]))
        if m.group(1) is not None:
            out.append("\\fB" + roff_escape(m.group(1)) + "\\fR")
        elif m.group(2) is not None:
            out.append("\\fB" + roff_escape(m.group(2)) + "\\fR")
        else:
            out.append(roff_escape(m.group(3)))
        pos = m.end()
    out.append(roff_escape(text[pos:]))
    s = "".join(out)
    return "\\&" + s if s.startswith((".", "'")) else s


def md_to_roff(md):
    """docs/cli.md to roff: headings, paragraphs, lists, code blocks, tables.
    The table of options (header "option | meaning") is skipped."""
    out, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            i += 1
            out.append(".PP\n.nf\n.RS 4")
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(roff_escape(lines[i]) if lines[i] else "")
                i += 1
            out.append(".RE\n.fi")
            i += 1
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            title = re.sub(r"[`*]", "", line.lstrip("#").strip())
            if level <= 1:
                pass
            elif level == 2 or title.lower() == "exit statuses":
                title = "EXIT STATUS" if title.lower() == "exit statuses" else title.upper()
                out.append('.SH "%s"' % roff_escape(title))
            else:
                out.append('.SS "%s"' % roff_escape(title))
            i += 1
            continue
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            if rows and [c.lower() for c in rows[0][:2]] == ["option", "meaning"]:
                out.append(".PP\nThe options are listed under \\fBOPTIONS\\fR above.")
                continue
            for cells in rows[1:]:
                out.append(".TP\n" + md_inline(cells[0]) + "\n" + md_inline(" | ".join(cells[1:])))
            continue
        if re.match(r"^(- |\d+\. )", line):
            m = re.match(r"^(- |\d+\. )", line)
            mark = "\\(bu" if m.group(1) == "- " else m.group(1).strip()
            item = [line[m.end():].strip()]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                item.append(lines[i].strip())
                i += 1
            out.append('.IP "%s" 4\n%s' % (mark, md_inline(" ".join(item))))
            continue
        if not line.strip():
            i += 1
            continue
        para = []
        while (i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "```"))
               and not re.match(r"^(- |\d+\. )", lines[i])):
            para.append(lines[i].strip())
            i += 1
        out.append(".PP\n" + md_inline(" ".join(para)))
    return "\n".join(out)


def cli_md_options(md):
    """{"--long": roff text} from docs/cli.md's tables of options, which say
    more than --help's one or two lines; a row "`--mode wall`" adds "wall: ..."."""
    found = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 2:
            continue
        m = re.search(r"`(--[a-z0-9-]+)(?: ([a-z][a-z-]*))?[^`]*`", cells[0])
        if not m:
            continue
        text = md_inline(" | ".join(cells[1:]))
        if m.group(2):
            text = "\\fB%s\\fR: %s" % (roff_escape(m.group(2)), text)
        found[m.group(1)] = found[m.group(1)] + "\n.br\n" + text if m.group(1) in found else text
    return found


def man_option(o, detail=None):
    head = ", ".join(roff_escape(x) for x in (o.short, o.long) if x)
    head = "\\fB" + head.replace(", ", "\\fR, \\fB") + "\\fR"
    if o.arg:
        head += " \\fI" + o.arg + "\\fR"
    return ".TP\n%s\n%s" % (head, detail or md_inline(" ".join(o.text)))


def man_page(binary, cli_md_path):
    commands, options, texts = collect(binary)
    with open(cli_md_path, encoding="utf-8") as f:
        cli_md = f.read()
    details = cli_md_options(cli_md)
    version = run_help(binary, "--version").split()[1]
    out = ['.\\" Generated by tools/gen_docs.py from `pystrobe --help` and docs/cli.md.',
           '.TH PYSTROBE 1 "" "pystrobe %s" "User Commands"' % version,
           ".SH NAME",
           "pystrobe \\- sampling profiler and stack dumper for running CPython processes",
           ".SH SYNOPSIS",
           ".nf"]
    synopsis = []
    for name, syn, _ in commands:
        for u in usage_lines(texts.get(name, "")) or ["pystrobe " + syn]:
            if u not in synopsis:
                synopsis.append(u)
    out += [roff_escape(u) for u in synopsis]
    out += [".fi",
            ".SH DESCRIPTION",
            "\\fBpystrobe\\fR attaches to a CPython 3.7 to 3.15 process from outside (no code in the",
            "target, no restart), reads the interpreter's own structures with",
            "\\fBprocess_vm_readv\\fR(2), and reports every thread's Python stack with file,",
            "function, line and column: sampled over time as a profile (\\fBrun\\fR,",
            "\\fBattach\\fR), or once (\\fBdump\\fR).",
            ".SH COMMANDS"]
    for name, syn, text in commands:
        out.append(".TP\n\\fB%s\\fR%s\n%s" % (roff_escape(name), roff_escape(syn[len(name):]),
                                             md_inline(text)))
    out.append(".SH OPTIONS")
    seen = {}
    for name, opts in options.items():
        key = tuple(o.long for o in opts)
        if key in seen:
            seen[key].append(name)
            continue
        seen[key] = [name]
    for key, names in seen.items():
        opts = options[names[0]]
        out.append('.SS "%s"' % " and ".join("pystrobe " + n for n in names))
        section = None
        for o in opts:
            if o.section != section and o.section:
                out.append(".PP\n\\fI%s\\fR" % roff_escape(o.section))
                section = o.section
            out.append(man_option(o, details.get(o.long)))
    out.append(md_to_roff(cli_md))
    out += [".SH SEE ALSO", "\\fBpython3\\fR(1), \\fBpy\\-spy\\fR(1)"]
    return "\n".join(out) + "\n"


# --- completions ----------------------------------------------------------------

def words(opts, with_arg):
    ws = []
    for o in opts:
        if bool(o.arg) == with_arg:
            ws += [x for x in (o.short, o.long) if x]
    return " ".join(ws)


def arg_words(opts, names):
    """The options whose argument is named one of names."""
    return " ".join(x for o in opts if o.arg in names for x in (o.short, o.long) if x)


BASH = r'''# bash completion for pystrobe. Generated by tools/gen_docs.py from
# `pystrobe help` and `pystrobe COMMAND --help`.

# Pids of the running Python processes: those whose name (comm) or whose
# argv[0]'s last part starts with "python". A script started through its
# "#!/path/to/python3" line has the script's name as comm and the
# interpreter as argv[0]. Builtins only: no fork per process.
_pystrobe_pids()
{
    local p c a
    for p in /proc/[0-9]*; do
        read -r c 2>/dev/null < "$p/comm" || continue
        a=
        read -r -d '' a 2>/dev/null < "$p/cmdline"
        if [[ $c == python* || ${a##*/} == python* ]]; then printf '%s\n' "${p#/proc/}"; fi
    done
}

_pystrobe()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local commands="@COMMANDS@"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi
    local cmd=${COMP_WORDS[1]} flags="" argopts="" fileopts="" pidopts="" operand=file
    case $cmd in
@CASES@
        help) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
              return ;;
        *) return ;;
    esac
    local o
    for o in $argopts; do
        if [ "$prev" = "$o" ]; then
            case " $fileopts " in
                *" $o "*) COMPREPLY=($(compgen -f -- "$cur")) ;;
            esac
            case " $pidopts " in
                *" $o "*) COMPREPLY=($(compgen -W "$(_pystrobe_pids)" -- "$cur")) ;;
            esac
            return
        fi
    done
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags $argopts" -- "$cur"))
    elif [ "$operand" = pid ]; then
        COMPREPLY=($(compgen -W "$(_pystrobe_pids)" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _pystrobe pystrobe
'''


def bash_completion(binary):
    commands, options, texts = collect(binary)
    cases = []
    for name, opts in options.items():
        cases.append('        %s) flags="%s"; argopts="%s"; fileopts="%s"; pidopts="%s"%s ;;'
                     % (name, words(opts, False), words(opts, True), arg_words(opts, FILE_ARGS),
                        arg_words(opts, {"PID"}), "; operand=pid" if takes_pid(name, texts) else ""))
    return (BASH.replace("@COMMANDS@", " ".join(c[0] for c in commands))
            .replace("@CASES@", "\n".join(cases)))


def zsh_quote(text):
    return text.replace("'", "'\\''")


def zsh_spec(o):
    desc = re.sub(r"[\[\]:]", "", (o.text[0] if o.text else "")).strip()
    desc = zsh_quote(desc.replace("\\", ""))
    names = [x for x in (o.short, o.long) if x]
    arg = ""
    if o.arg:
        action = ("_files" if o.arg in FILE_ARGS else
                  "_pystrobe_pids" if o.arg == "PID" else " ")
        arg = ":%s:%s" % (o.arg.lower(), action)
    if len(names) == 2:
        return "'(%s)'{%s}'[%s]%s'" % (" ".join(names), ",".join(names), desc, arg)
    return "'%s[%s]%s'" % (names[0], desc, arg)


ZSH = r'''#compdef pystrobe
# zsh completion for pystrobe. Generated by tools/gen_docs.py from
# `pystrobe help` and `pystrobe COMMAND --help`.

# The running Python processes, as "PID:NAME": comm or argv[0]'s last part
# starts with "python" (a "#!/path/to/python3" script's comm is its own name).
_pystrobe_pids() {
    local -a pids
    local p c a
    for p in /proc/<->(N); do
        c=$(<$p/comm) 2>/dev/null || continue
        a=${${(0)"$(<$p/cmdline)"}[1]} 2>/dev/null
        [[ $c == python* || ${a:t} == python* ]] && pids+=("${p:t}:$c")
    done
    _describe -t pids 'Python process' pids
}

_pystrobe() {
    local -a commands
    commands=(
@COMMANDS@
    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'pystrobe command' commands
        return
    fi
    local cmd=$words[2]
    shift words
    (( CURRENT-- ))
    case $cmd in
@CASES@
        help) _describe -t commands 'pystrobe command' commands ;;
    esac
}

_pystrobe "$@"
'''


def zsh_completion(binary):
    commands, options, texts = collect(binary)
    cmd_lines = ["        '%s:%s'" % (n, zsh_quote(re.sub(r"[:\[\]]", "", t)))
                 for n, _, t in commands]
    cases = []
    for name, opts in options.items():
        if takes_pid(name, texts):
            rest = "'1:pid:_pystrobe_pids'"
        elif name == "run":
            rest = "'*::python script:_files'"
        else:
            rest = "'1:file:_files'"
        specs = " \\\n                ".join([zsh_spec(o) for o in opts] + [rest])
        cases.append("        %s)\n            _arguments -s \\\n                %s ;;"
                     % (name, specs))
    return (ZSH.replace("@COMMANDS@", "\n".join(cmd_lines))
            .replace("@CASES@", "\n".join(cases)))


def main(argv):
    if len(argv) == 4 and argv[1] == "man":
        sys.stdout.write(man_page(argv[2], argv[3]))
    elif len(argv) == 3 and argv[1] == "bash":
        sys.stdout.write(bash_completion(argv[2]))
    elif len(argv) == 3 and argv[1] == "zsh":
        sys.stdout.write(zsh_completion(argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
