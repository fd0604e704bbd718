# ci-lib.sh: helpers shared by the CI daemon scripts (sourced, not run).
# The sourcing script defines log and die first; everything here binds
# 127.0.0.1 only and waits with bounded polls, never fixed sleeps.

# listening PORT reports whether something listens on 127.0.0.1:PORT.
listening() {
	ss -Hltn "sport = :$1" | grep -q "127.0.0.1:$1"
}

# wait_port NAME PID PORT LOGFILE polls (bounded, 10 s) until PORT listens,
# failing at once if the daemon exits.
wait_port() {
	local name=$1 pid=$2 port=$3 logfile=$4 i
	for ((i = 0; i < 200; i++)); do
		if listening "$port"; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$logfile" >&2 || true
			die "$name (pid $pid) exited before listening on 127.0.0.1:$port"
		fi
		sleep 0.05
	done
	cat "$logfile" >&2 || true
	die "$name (pid $pid) not listening on 127.0.0.1:$port after 10s"
}

# stop DIR kills every daemon whose PID is recorded in DIR/*.pid (TERM, then
# KILL after a bounded wait) and removes DIR.
stop() {
	local dir=$1 pidfile pid i
	[[ -d $dir ]] || return 0
	for pidfile in "$dir"/*.pid; do
		[[ -e $pidfile ]] || continue
		pid=$(<"$pidfile")
		kill -TERM "$pid" 2>/dev/null || continue
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	rm -rf -- "$dir"
}
