#!/usr/bin/env bash
# measure.sh: profiles the demo as a cluster node on PostgreSQL, once per
# telemetry mode, and prints each profile's shares (README.md here).
#
#   AIONOTEL_POSTGRES_DSN=postgres://... examples/demo/cpushare/measure.sh OUT RATE WORKERS DURATION MODE...
#   ENGINE=goworkflows examples/demo/cpushare/measure.sh OUT RATE - DURATION MODE...
#
# ENGINE=goworkflows profiles the go-workflows service of
# examples/goworkflows instead (its SQLite backend wrapped by otelworkflows,
# RATE orders a second, a fresh database file OUT/N-MODE.sqlite per run;
# WORKERS is ignored and no PostgreSQL is needed).
#
# MODE is metrics (metrics over OTLP, no span started), unsampled (metrics,
# and the SDK's spans never sampled), on (metrics and the timeline's spans
# over OTLP) or none (nothing exported, no span started); a mode may repeat.
# Each run gets a fresh schema aionotel_cpushare_MODE (dropped first), so
# that no run resumes another's workflows; exports go to cpushare's
# discarding OTLP/HTTP sink on 127.0.0.1:14318. Needs go and psql.
set -euo pipefail
engine=${ENGINE:-demo}
case $engine in demo | goworkflows) ;; *)
	echo "measure.sh: ENGINE=$engine: want demo or goworkflows" >&2
	exit 2
	;;
esac
if [ $# -lt 5 ] || { [ "$engine" = demo ] && [ -z "${AIONOTEL_POSTGRES_DSN:-}" ]; }; then
	echo "usage: AIONOTEL_POSTGRES_DSN=... $0 OUT RATE WORKERS DURATION MODE..." >&2
	echo "       ENGINE=goworkflows $0 OUT RATE - DURATION MODE..." >&2
	exit 2
fi
out=$1 rate=$2 workers=$3 duration=$4
shift 4
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
(cd "$here/../.." && go build -o "$out/$engine" "./$engine" && go build -o "$out/cpushare" ./demo/cpushare)
cd "$out"
./cpushare -sink 127.0.0.1:14318 >sink.log 2>&1 &
sink=$!
trap 'kill $sink' EXIT
sleep 1
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:14318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_LOGS_EXPORTER=none
sep='?'
case ${AIONOTEL_POSTGRES_DSN:-} in *'?'*) sep='&' ;; esac
n=0
for mode in "$@"; do
	n=$((n + 1))
	case $mode in
	metrics) vars=(OTEL_METRICS_EXPORTER=otlp OTEL_TRACES_EXPORTER=none OTEL_TRACES_SAMPLER=always_off) ;;
	unsampled) vars=(OTEL_METRICS_EXPORTER=otlp OTEL_TRACES_EXPORTER=otlp OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0) ;;
	on) vars=(OTEL_METRICS_EXPORTER=otlp OTEL_TRACES_EXPORTER=otlp OTEL_TRACES_SAMPLER=parentbased_always_on) ;;
	none) vars=(OTEL_METRICS_EXPORTER=none OTEL_TRACES_EXPORTER=none OTEL_TRACES_SAMPLER=always_off) ;;
	*)
		echo "measure.sh: mode $mode: want metrics, unsampled, on or none" >&2
		exit 2
		;;
	esac
	if [ "$engine" = goworkflows ]; then
		rm -f "$n-$mode".sqlite*
		env "${vars[@]}" ./goworkflows -db "$n-$mode.sqlite" -exporter otlp -listen= \
			-rate "$rate" -duration "$duration" -cpuprofile "$n-$mode.pprof" >"$n-$mode.out" 2>&1 || true
		grep -E '^started|^draining|^not drained|workflows (started|closed)' "$n-$mode.out" | tail -4
		./cpushare "$n-$mode.pprof"
		continue
	fi
	schema=aionotel_cpushare_$mode
	psql -q "$AIONOTEL_POSTGRES_DSN" -c "set client_min_messages = warning; drop schema if exists $schema cascade; create schema $schema" >/dev/null
	env "${vars[@]}" ./demo -store "postgres:$AIONOTEL_POSTGRES_DSN${sep}search_path=$schema" -node cpushare \
		-rate "$rate" -workers "$workers" -duration "$duration" -cpuprofile "$n-$mode.pprof" >"$n-$mode.out" 2>&1
	grep -E '^summary|workflows.started |activities.succeeded ' "$n-$mode.out"
	./cpushare "$n-$mode.pprof"
done
