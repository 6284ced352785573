//! Test guest that is not an assignor at all: a plain program, which `wasm32-wasip2` builds
//! into a command component (exporting `wasi:cli/run`, a different world). The runtime must
//! refuse to load it as an assignor with a clear message.

fn main() {
    println!("hello");
}
