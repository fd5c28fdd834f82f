# bash completion for kiln(1)
_kiln()
{
	local cur prev words cword
	_init_completion || return
	local cmds="status top ls show log build warm rm pin unpin gc verify export import stats config stop help"
	local globals="--socket --cache-dir --json --help -V --version"
	local cmd="" i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--socket|--cache-dir) ((i++)) ;;
		-*) ;;
		*) cmd=${words[i]}; break ;;
		esac
	done
	# build's --output is an output kind; stats' -o/--output is a file.
	if [[ $cmd == build && $prev == --output ]]; then
		COMPREPLY=($(compgen -W "shared cubin fatbin ptx" -- "$cur"))
		return
	fi
	case $prev in
	--socket|--cache-dir|-o|--output) _filedir; return ;;
	-d|--interval|-n|--frames|--mode) return ;;
	-t|--toolchain) COMPREPLY=($(compgen -W "cc c++ nvcc" -- "$cur")); return ;;
	--max-size|max-size) return ;;
	esac
	if [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "$cmds $globals" -- "$cur"))
		return
	fi
	case $cmd in
	build) [[ $cur == -* ]] && COMPREPLY=($(compgen -W "-t --toolchain --alias --label --output --help" -- "$cur")) || _filedir ;;
	warm) _filedir json ;;
	export|import) _filedir ;;
	gc) COMPREPLY=($(compgen -W "--max-size --help" -- "$cur")) ;;
	ls) COMPREPLY=($(compgen -W "-w --wide --help" -- "$cur")) ;;
	status) COMPREPLY=($(compgen -W "-v --verbose --help" -- "$cur")) ;;
	top) COMPREPLY=($(compgen -W "--once -d --interval -n --frames --help" -- "$cur")) ;;
	stats) COMPREPLY=($(compgen -W "--zero -z --prometheus -o --output --mode --help" -- "$cur")) ;;
	config) COMPREPLY=($(compgen -W "max-size --unset --help" -- "$cur")) ;;
	help) COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
	show|log|rm|pin|unpin)
		# Aliases and key prefixes of the cache, when a daemon or cache answers.
		local refs
		refs=$(kiln --json ls 2>/dev/null | tr ',' '\n' | sed -n 's/.*"\(alias\|key\)":"\([^"]*\)".*/\2/p')
		[[ $cmd == show ]] && refs+=" --deps"
		COMPREPLY=($(compgen -W "$refs --help" -- "$cur")) ;;
	*) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
	esac
} && complete -F _kiln kiln
