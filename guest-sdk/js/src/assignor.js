/**
 * The interface an assignor implements (Kafka's `TaskAssignor` with `Configurable`).
 *
 * @module
 */

/** @import { Assignment, Group, Topology } from "./model.js" */

/**
 * A task assignor. Implement `name` and `assign`; override `configure` to read configuration.
 * A fresh instance serves every call: nothing survives between calls.
 *
 * @abstract
 */
export class TaskAssignor {
  /**
   * The assignor's unique short name, used in `streams.assignor.name`.
   *
   * @abstract
   * @returns {string}
   */
  name() {
    throw new Error(`${this.constructor.name} does not implement name()`);
  }

  /**
   * Reads the broker's (or the upload's) configuration; throw an `Error` naming the bad key
   * and the accepted values to fail the load. Ignores it by default.
   *
   * @param {Map<string, string>} _config
   */
  configure(_config) {}

  /**
   * Computes the group's new target assignment; throw an `AssignError` when there is none.
   *
   * @abstract
   * @param {Group} _group
   * @param {Topology} _topology
   * @returns {Assignment}
   */
  assign(_group, _topology) {
    throw new Error(`${this.constructor.name} does not implement assign()`);
  }
}
