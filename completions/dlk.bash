# bash completion for dlk. The answers come from `dlk __complete`, which reads dlk's own command
# and option tables, so completion can never disagree with `dlk -h`.
_dlk() {
	local cur words cword
	if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
		_get_comp_words_by_ref -n =: cur words cword
	else
		cur=${COMP_WORDS[COMP_CWORD]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	fi
	local line out
	out=$("${words[0]}" __complete "${words[@]:1:cword}" 2>/dev/null) || return 0
	COMPREPLY=()
	while IFS= read -r line; do
		case $line in
		:file) mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -f -- "$cur") ;;
		:file\ *)
			# only the files with one of these endings, and directories to look inside
			local f e
			while IFS= read -r f; do
				[ -d "$f" ] && { COMPREPLY+=("$f"); continue; }
				for e in ${line#:file }; do
					case $f in *"$e") COMPREPLY+=("$f"); break ;; esac
				done
			done < <(compgen -f -- "$cur") ;;
		:dir) mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -d -- "$cur") ;;
		"") ;;
		*) COMPREPLY+=("$line") ;;
		esac
	done <<<"$out"
	# a value that ends in '=' (--set training.epochs=) is not finished: no trailing space
	if [ "${#COMPREPLY[@]}" = 1 ] && [ "${COMPREPLY[0]%=}" != "${COMPREPLY[0]}" ]; then
		compopt -o nospace 2>/dev/null
	fi
	if declare -F __ltrim_colon_completions >/dev/null 2>&1; then
		__ltrim_colon_completions "$cur"
	fi
}
complete -F _dlk dlk
# busybox-style links: dlk-train == dlk train
for _dlk_cmd in $(dlk __commands 2>/dev/null); do
	complete -F _dlk "dlk-$_dlk_cmd"
done
unset _dlk_cmd
