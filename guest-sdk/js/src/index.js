/**
 * Write Kafka Streams task assignors in JavaScript, as WebAssembly components of the
 * `kafka:streams-assignor@0.1.0` world.
 *
 * Extend {@link TaskAssignor} over the domain model (`Group`, {@link Topology},
 * {@link Assignment}) and export it from the module componentize-js wraps:
 * `export const taskAssignor = exportAssignor(MyAssignor);`. `assignor-sdk/testing` runs the
 * same class natively on the JSON input contract.
 *
 * @module
 */

export { TaskAssignor } from "./assignor.js";
export { exportAssignor } from "./component.js";
export { AssignError, Assignment, Topology, compareIds } from "./model.js";
