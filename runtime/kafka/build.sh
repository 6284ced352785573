#!/usr/bin/env bash
# Builds the Kafka broker plugin and runs its Java tests, from a clean clone:
#
#   runtime/kafka/build.sh          native bridge, plugin jar, test components, JUnit tests
#   runtime/kafka/build.sh bench    the same build, then the timing harness (gen.py inputs;
#                                   BENCH_JAVA_FLAGS=-Dbench.members=1000 for one size)
#
# Output, in $CARGO_TARGET_DIR/kafka (the workspace's target/kafka by default):
#   assignor-kafka-plugin.jar       the plugin, with libassignor_kafka_bridge.so inside it
#   libassignor_kafka_bridge.so     the bridge, for operators who put it on java.library.path
#
# Needs cargo, a JDK 17 (javac, jar, java) and Debian's slf4j and junit5 jars; on a machine
# without them (CI runs as root with CI=true) it installs them with apt-get. No Maven or
# Gradle repository is used: the KIP-1357 interfaces the plugin compiles against are the
# compile-only copies in kafka-api/, which are not packaged in the jar.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
out=$target/kafka
mode=${1:-test}

slf4j_api=/usr/share/java/slf4j-api.jar
slf4j_simple=/usr/share/java/slf4j-simple.jar
junit=/usr/share/java/junit-platform-console-standalone.jar
missing=()
command -v javac >/dev/null && command -v jar >/dev/null || missing+=(openjdk-17-jdk-headless)
[ -f "$slf4j_api" ] && [ -f "$slf4j_simple" ] || missing+=(libslf4j-java)
[ -f "$junit" ] || missing+=(junit5)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "build.sh: missing ${missing[*]}; install them (apt-get install ${missing[*]}) and retry" >&2
    exit 1
  fi
  echo "build.sh: installing ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cd "$root"
# The tests run on the dev profile, whose dependencies (wasmtime above all) the workspace
# optimises at opt-level 2 and `cargo test --workspace` has already built: a release build
# would cost CI a second full wasmtime build (~6 min). The bridge is built with every library
# of the workspace selected, so that features unify as in `cargo test --workspace` and
# wasmtime is reused (`-p assignor-kafka-bridge` alone unifies over the bridge's graph only,
# which gives wasmtime another hash and rebuilt it). The timing harness measures a release
# build, as a broker would run.
case $mode in
  bench) build=(--release -p assignor-kafka-bridge) profile=(--release) profile_dir=release ;;
  *) build=(--workspace --lib --bin assignor) profile=() profile_dir=debug ;;
esac
cargo build "${build[@]}"
lib=$target/$profile_dir/libassignor_kafka_bridge.so

rm -rf "$out/api" "$out/classes" "$out/test-classes"
mkdir -p "$out/api" "$out/classes/native" "$out/test-classes"
javac_flags=(--release 17 -Xlint:all -Werror -encoding UTF-8)
javac "${javac_flags[@]}" -d "$out/api" $(find "$here/kafka-api" -name '*.java')
javac "${javac_flags[@]}" -cp "$out/api:$slf4j_api" -d "$out/classes" $(find "$here/src/main/java" -name '*.java')
cp "$lib" "$out/classes/native/"
cp "$lib" "$out/"
jar --create --file "$out/assignor-kafka-plugin.jar" -C "$out/classes" .
echo "build.sh: built $out/assignor-kafka-plugin.jar" >&2

# The components the tests load, built from source (the samples, the hostile guests, the
# hot-swap versions); the tool prints where they are.
cargo run "${profile[@]}" -q -p assignor-kafka-test-components > "$out/components.properties"
# The tests compile against the plugin's classes and the API copies; JUnit's launcher runs them.
javac "${javac_flags[@]}" -Xlint:-processing -cp "$out/api:$out/classes:$slf4j_api:$junit" \
  -d "$out/test-classes" $(find "$here/src/test/java" -name '*.java')
classpath="$junit:$slf4j_api:$slf4j_simple:$out/api:$out/assignor-kafka-plugin.jar:$out/test-classes"
# The bridge is loaded from the jar, as a broker with only the jar would load it.
# The hot-swap-from-a-service tests start `assignor serve` (the dev build `cargo test
# --workspace` made) on loopback, in a temporary directory of their own.
java_flags=(-Xcheck:jni -Dassignor.components="$out/components.properties" -Dassignor.cli="$target/debug/assignor"
  -Dorg.slf4j.simpleLogger.defaultLogLevel=info -Dorg.slf4j.simpleLogger.showDateTime=true)

case $mode in
  test)
    java "${java_flags[@]}" -cp "$classpath" org.junit.platform.console.ConsoleLauncher \
      --disable-banner --details=tree --fail-if-no-tests --scan-classpath "$out/test-classes"
    ;;
  bench)
    gen=${GEN_PY:-$root/../shared/bench/gen.py}
    # Without -Xcheck:jni (it checks every JNI call), warnings only, and the JIT warmed up by
    # the harness itself. Signals-based traps off (the plugin's setting), then on, each in a
    # JVM of its own: wasmtime installs its handlers process-wide once an engine wants them.
    for signals in false true; do
      java ${BENCH_JAVA_FLAGS:-} -Dassignor.components="$out/components.properties" -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        -cp "$classpath" dev.assignor.kafka.Bench "$gen" "$signals" sample-balanced sample-sticky
    done
    ;;
  *)
    echo "usage: build.sh [test|bench]" >&2
    exit 2
    ;;
esac
