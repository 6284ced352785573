//! Prints where the Kafka plugin's test components are (built by `build.rs`), as Java
//! properties: `runtime/kafka/build.sh` hands the file to the Java tests.

fn main() {
    print!(
        "{}",
        include_str!(concat!(env!("OUT_DIR"), "/components.properties"))
    );
}
