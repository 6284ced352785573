/**
 * Run an assignor natively, on the project's JSON input contract, and check its result.
 *
 * The same documents `assignor assign --input` reads (`runtime/demo/group.json`), so a test
 * can take a captured or hand-written group, call the assignor as plain JavaScript, and compare
 * with what the sandboxed component returns.
 *
 * @module
 */

import { Topology } from "./model.js";

/** @import { Assignment, Group, Member, Task } from "./model.js" */

/**
 * The group and topology of an input document (`topology`, `configs`, `members`).
 *
 * @param {string} document
 * @returns {{ group: Group, topology: Topology }}
 */
export function parseInput(document) {
  const doc = JSON.parse(document);
  /** @type {Map<string, number>} */
  const index = new Map(doc.topology.subtopologies.map((/** @type {any} */ s, /** @type {number} */ i) => [s.id, i]));
  const topology = new Topology(
    doc.topology.subtopologies.map((/** @type {any} */ s) => ({
      id: s.id,
      partitions: s.maxNumInputPartitions,
      isStateful: s.isStateful,
      sourceTopics: (s.sourceTopics ?? []).map((/** @type {any} */ t) => ({
        name: t.name,
        partitions: (t.partitionRacks ?? []).length,
        partitionRacks: new Map(
          (t.partitionRacks ?? [])
            .map((/** @type {string[]} */ racks, /** @type {number} */ p) => [p, racks])
            .filter((/** @type {[number, string[]]} */ [, racks]) => racks.length > 0),
        ),
      })),
    })),
  );
  /** @param {Record<string, number[]> | undefined} bySubtopology */
  const tasks = (bySubtopology) =>
    Object.entries(bySubtopology ?? {}).flatMap(([s, ps]) =>
      ps.map((partition) => ({ subtopology: /** @type {number} */ (index.get(s)), partition })),
    );
  /** @param {Record<string, Record<string, number>> | undefined} bySubtopology */
  const offsets = (bySubtopology) =>
    Object.entries(bySubtopology ?? {}).flatMap(([s, ps]) =>
      Object.entries(ps).map(
        ([p, o]) =>
          /** @type {[Task, bigint]} */ ([{ subtopology: /** @type {number} */ (index.get(s)), partition: Number(p) }, BigInt(o)]),
      ),
    );
  /** @type {Member[]} */
  const members = doc.members.map((/** @type {any} */ m) => ({
    memberId: m.memberId,
    processId: m.processId,
    instanceId: m.instanceId,
    rackId: m.rackId,
    clientTags: new Map(Object.entries(m.clientTags ?? {})),
    activeTasks: tasks(m.activeTasks),
    standbyTasks: tasks(m.standbyTasks),
    warmupTasks: tasks(m.warmupTasks),
    taskOffsets: offsets(m.taskOffsets),
    taskEndOffsets: offsets(m.taskEndOffsets),
  }));
  const configs = doc.configs ?? {};
  return {
    group: {
      members,
      numStandbyReplicas: configs.numStandbyReplicas ?? 0,
      rackAwareAssignmentTags: configs.rackAwareAssignmentTags ?? [],
    },
    topology,
  };
}

/**
 * The output document `assignor assign` prints: member id → sorted tasks by subtopology.
 *
 * @param {Group} group
 * @param {Topology} topology
 * @param {Assignment} assignment
 * @returns {{ members: Record<string, { activeTasks: Record<string, number[]>, standbyTasks: Record<string, number[]> }> }}
 */
export function toOutput(group, topology, assignment) {
  const active = assignment.activeByMember();
  const standby = assignment.standbyByMember();
  /** @param {Task[]} tasks */
  const bySubtopology = (tasks) => {
    /** @type {Record<string, number[]>} */
    const out = {};
    const sorted = [...tasks].sort((a, b) => a.subtopology - b.subtopology || a.partition - b.partition);
    for (const task of sorted) {
      (out[topology.subtopologies[task.subtopology].id] ??= []).push(task.partition);
    }
    return out;
  };
  return {
    members: Object.fromEntries(
      group.members.map((m, i) => [
        m.memberId,
        { activeTasks: bySubtopology(active[i]), standbyTasks: bySubtopology(standby[i]) },
      ]),
    ),
  };
}

/**
 * What the runtime would reject in `assignment`, as sentences; empty when it is valid: every
 * task active exactly once, standbys only of stateful tasks, never on the active's process,
 * every task inside the topology.
 *
 * @param {Group} group
 * @param {Topology} topology
 * @param {Assignment} assignment
 * @returns {string[]}
 */
export function problems(group, topology, assignment) {
  /** @param {Task} t */
  const exists = (t) =>
    t.subtopology >= 0 &&
    t.subtopology < topology.subtopologies.length &&
    t.partition >= 0 &&
    t.partition < topology.subtopologies[t.subtopology].partitions;
  /** @param {Task} t */
  const name = (t) => (exists(t) ? topology.taskName(t) : JSON.stringify(t));
  /** @param {Task} t */
  const key = (t) => `${t.subtopology}:${t.partition}`;
  /** @type {string[]} */
  const found = [];
  /** @type {Map<string, number>} */
  const owner = new Map();
  for (const [member, tasks] of assignment.activeByMember().entries()) {
    for (const task of tasks) {
      if (!exists(task)) found.push(`unknown task ${name(task)}`);
      else if (owner.has(key(task))) found.push(`duplicate active task ${name(task)}`);
      owner.set(key(task), member);
    }
  }
  for (const task of topology.tasks()) {
    if (!owner.has(key(task))) found.push(`missing task: ${name(task)} is not active on any member`);
  }
  for (const [member, tasks] of assignment.standbyByMember().entries()) {
    for (const task of tasks) {
      const active = owner.get(key(task));
      if (!exists(task) || !topology.isStateful(task)) {
        found.push(`standby for a stateless or unknown task ${name(task)}`);
      } else if (active !== undefined && group.members[active].processId === group.members[member].processId) {
        found.push(`standby of ${name(task)} on the active's process`);
      }
    }
  }
  return found;
}
