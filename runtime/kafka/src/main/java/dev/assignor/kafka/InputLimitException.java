package dev.assignor.kafka;

/**
 * A group over one of the component's input limits, found by the plugin before it encodes the
 * group, so that a hostile group costs no more work than the limits allow. The message reads
 * as the sandbox's own {@code input-limit} errors do: which field, its value, the limit and
 * the limit's key ({@code group.streams.assignor.<name>}).
 */
final class InputLimitException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    InputLimitException(String field, long value, long limit, String name) {
        super(field + " is " + value + ", over the limit of " + limit + " (" + name
            + "); shrink the group or raise the limit");
    }
}
