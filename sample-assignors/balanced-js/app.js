/**
 * A balanced task assignor in JavaScript: the algorithm of the Rust `balanced` sample, output
 * for output, so that the two can be compared in the same sandbox.
 *
 * - **Actives** are dealt round-robin over the members, visiting processes in turn, so every
 *   member gets ⌊T/M⌋ or ⌈T/M⌉ active tasks.
 * - **Standbys**: each task of a stateful subtopology gets up to `numStandbyReplicas`
 *   standbys, each on the least-loaded member of a process that holds no copy of the task yet.
 *
 * It ignores the current assignment: it is balanced, not sticky. componentize-js wraps this
 * module (`guest-sdk/js/build`); `node --test` runs it natively.
 *
 * @module
 */

import { Assignment, TaskAssignor, compareIds, exportAssignor } from "../../guest-sdk/js/src/index.js";

/** @import { Group, Topology } from "../../guest-sdk/js/src/model.js" */

/** Spreads actives evenly over members and standbys over other processes. */
export class BalancedAssignor extends TaskAssignor {
  /** @returns {string} the Rust sample's name, with the language to tell them apart */
  name() {
    return "balanced-js";
  }

  /**
   * Deals actives round-robin over interleaved members, then places standbys.
   *
   * @param {Group} group
   * @param {Topology} topology
   * @returns {Assignment}
   */
  assign(group, topology) {
    const assignment = new Assignment(group);
    if (group.members.length === 0) return assignment;
    const order = interleavedMembers(group);
    const processIds = [...new Set(group.members.map((m) => m.processId))].sort(compareIds);
    const numbers = new Map(processIds.map((p, i) => [p, i]));
    // A member's position in `order` stands for it; `processOf[pos]` is its process number.
    const processOf = order.map((member) => /** @type {number} */ (numbers.get(group.members[member].processId)));

    // Typed arrays indexed directly, no object and no built-in call per task: in the
    // component's interpreter those cost more than the algorithm (see `Assignment`).
    const load = new Uint32Array(order.length);
    const taskCount = topology.subtopologies.reduce((n, s) => n + s.partitions, 0);
    const activePos = new Uint32Array(taskCount);
    let task = 0;
    for (let subtopology = 0; subtopology < topology.subtopologies.length; subtopology++) {
      const partitions = topology.subtopologies[subtopology].partitions;
      for (let partition = 0; partition < partitions; partition++, task++) {
        const pos = task % order.length;
        assignment.addActive(order[pos], subtopology, partition);
        load[pos]++;
        activePos[task] = pos;
      }
    }

    const replicas = group.numStandbyReplicas;
    if (replicas === 0) return assignment;
    // Least-loaded first; ties go to the earlier member in the interleaved order.
    const heap = new MinHeap(order.length);
    for (let pos = 0; pos < order.length; pos++) heap.push(load[pos] * POSITIONS + pos);
    const holding = new Uint32Array(replicas + 1);
    const skipped = new Float64Array(order.length);
    task = 0;
    for (let subtopology = 0; subtopology < topology.subtopologies.length; subtopology++) {
      const { partitions, isStateful } = topology.subtopologies[subtopology];
      for (let partition = 0; partition < partitions; partition++, task++) {
        if (!isStateful) continue;
        holding[0] = processOf[activePos[task]];
        let held = 1;
        let skips = 0;
        while (held <= replicas && heap.size > 0) {
          const entry = heap.pop();
          const pos = entry % POSITIONS;
          if (holds(holding, held, processOf[pos])) {
            skipped[skips++] = entry;
            continue;
          }
          assignment.addStandby(order[pos], subtopology, partition);
          holding[held++] = processOf[pos];
          heap.push(entry + POSITIONS);
        }
        for (let i = 0; i < skips; i++) heap.push(skipped[i]);
      }
    }
    return assignment;
  }
}

/**
 * Member indices ordered so that consecutive positions are on different processes: the first
 * member of every process, then the second of every process, and so on (members sorted by id
 * within a process, processes by id, so the result does not depend on input order).
 *
 * @param {Group} group
 * @returns {number[]}
 */
export function interleavedMembers(group) {
  /** @type {Map<string, number[]>} */
  const byProcess = new Map();
  group.members.forEach((m, i) => byProcess.set(m.processId, [...(byProcess.get(m.processId) ?? []), i]));
  const processes = [...byProcess.keys()]
    .sort(compareIds)
    .map((p) =>
      /** @type {number[]} */ (byProcess.get(p)).sort((a, b) => compareIds(group.members[a].memberId, group.members[b].memberId)),
    );
  const rounds = Math.max(...processes.map((ms) => ms.length));
  const order = [];
  for (let r = 0; r < rounds; r++) {
    for (const ms of processes) if (r < ms.length) order.push(ms[r]);
  }
  return order;
}

/**
 * Whether the first `held` processes of `holding` include `process`.
 *
 * @param {Uint32Array} holding
 * @param {number} held
 * @param {number} process
 * @returns {boolean}
 */
function holds(holding, held, process) {
  for (let i = 0; i < held; i++) if (holding[i] === process) return true;
  return false;
}

/**
 * A heap entry is one number, `load * POSITIONS + pos`, ordered as the Rust sample orders
 * `(load, pos)`: member positions stay below it (the runtime's member limit is 100,000).
 */
const POSITIONS = 2 ** 20;

/** A binary min-heap of numbers, of a fixed capacity. */
class MinHeap {
  /** @param {number} capacity */
  constructor(capacity) {
    this.items = new Float64Array(capacity);
    this.size = 0;
  }

  /** @param {number} item */
  push(item) {
    const items = this.items;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (item >= items[parent]) break;
      items[i] = items[parent];
      i = parent;
    }
    items[i] = item;
  }

  /** @returns {number} the smallest item, removed */
  pop() {
    const items = this.items;
    const top = items[0];
    const last = items[--this.size];
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.size) break;
      const m = l + 1 < this.size && items[l + 1] < items[l] ? l + 1 : l;
      if (items[m] >= last) break;
      items[i] = items[m];
      i = m;
    }
    items[i] = last;
    return top;
  }
}

export const taskAssignor = exportAssignor(BalancedAssignor);
