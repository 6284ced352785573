/**
 * A test guest: a JavaScript assignor whose code fails with an exception it did not foresee.
 *
 * `assign` prints a line, then reads a property of `null` (`TypeError`); `configure` throws an
 * `Error` when `failing.in` is `configure`. The host must see both as the assignor's own
 * errors (a `guest-error` from `assign`, a refused load from `configure`) with the exception,
 * where it was thrown and what was printed, never as a bare trap.
 *
 * @module
 */

import { TaskAssignor, exportAssignor } from "../../../guest-sdk/js/src/index.js";

/** @import { Group, Topology } from "../../../guest-sdk/js/src/model.js" */

/** Fails in `assign` always, and in `configure` when asked to. */
class FailingAssignor extends TaskAssignor {
  /** @returns {string} */
  name() {
    return "failing-js";
  }

  /** @param {Map<string, string>} config */
  configure(config) {
    if (config.get("failing.in") === "configure") {
      throw new Error("configure failed on purpose");
    }
  }

  /**
   * @param {Group} group
   * @param {Topology} _topology
   * @returns {never}
   */
  assign(group, _topology) {
    console.log(`assigning ${group.members.length} members`);
    const missing = /** @type {any} */ (null);
    return missing.property;
  }
}

export const taskAssignor = exportAssignor(FailingAssignor);
