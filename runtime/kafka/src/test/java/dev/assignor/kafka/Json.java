package dev.assignor.kafka;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The smallest JSON reader the tests need for gen.py's output (no library is reachable here). */
final class Json {
    private final String s;
    private int pos;

    private Json(String s) {
        this.s = s;
    }

    /** Objects as {@code Map}, arrays as {@code List}, numbers as {@code Long} or {@code Double}. */
    static Object parse(String text) {
        Json j = new Json(text);
        Object v = j.value();
        j.space();
        if (j.pos != text.length()) {
            throw j.error("trailing characters");
        }
        return v;
    }

    private Object value() {
        space();
        char c = s.charAt(pos);
        switch (c) {
            case '{': {
                pos++;
                Map<String, Object> m = new LinkedHashMap<>();
                space();
                if (s.charAt(pos) == '}') {
                    pos++;
                    return m;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    m.put(key, value());
                    space();
                    if (s.charAt(pos++) == '}') {
                        return m;
                    }
                }
            }
            case '[': {
                pos++;
                List<Object> l = new ArrayList<>();
                space();
                if (s.charAt(pos) == ']') {
                    pos++;
                    return l;
                }
                while (true) {
                    l.add(value());
                    space();
                    if (s.charAt(pos++) == ']') {
                        return l;
                    }
                }
            }
            case '"':
                return string();
            case 't':
                pos += 4;
                return Boolean.TRUE;
            case 'f':
                pos += 5;
                return Boolean.FALSE;
            case 'n':
                pos += 4;
                return null;
            default:
                return number();
        }
    }

    private String string() {
        expect('"');
        StringBuilder b = new StringBuilder();
        while (true) {
            char c = s.charAt(pos++);
            if (c == '"') {
                return b.toString();
            }
            if (c == '\\') {
                char e = s.charAt(pos++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16)); pos += 4; break;
                    default: b.append(e);
                }
            } else {
                b.append(c);
            }
        }
    }

    private Object number() {
        int start = pos;
        while (pos < s.length() && "+-0123456789.eE".indexOf(s.charAt(pos)) >= 0) {
            pos++;
        }
        String n = s.substring(start, pos);
        if (n.isEmpty()) {
            throw error("unexpected character");
        }
        return n.contains(".") || n.contains("e") || n.contains("E") ? (Object) Double.parseDouble(n) : (Object) Long.parseLong(n);
    }

    private void expect(char c) {
        if (s.charAt(pos++) != c) {
            throw error("expected " + c);
        }
    }

    private void space() {
        while (pos < s.length() && Character.isWhitespace(s.charAt(pos))) {
            pos++;
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException(what + " at " + pos);
    }
}
