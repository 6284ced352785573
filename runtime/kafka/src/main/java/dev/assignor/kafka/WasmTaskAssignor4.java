package dev.assignor.kafka;

/**
 * A second, third or fourth component in one broker: the same plugin under its own keys,
 * {@code group.streams.assignor.wasm.4.path} and so on (see {@link WasmTaskAssignor#prefix}).
 * List it in {@code group.streams.assignors} beside {@link WasmTaskAssignor}.
 */
public class WasmTaskAssignor4 extends WasmTaskAssignor {
}
