package dev.assignor.kafka;

/**
 * A second, third or fourth component in one broker: the same plugin under its own keys,
 * {@code group.streams.assignor.wasm.2.path} and so on (see {@link WasmTaskAssignor#prefix}).
 * List it in {@code group.streams.assignors} beside {@link WasmTaskAssignor}.
 */
public class WasmTaskAssignor2 extends WasmTaskAssignor {
}
