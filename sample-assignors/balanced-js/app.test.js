// Native tests of the JavaScript balanced assignor (`node --test`); the sandboxed runs are in
// tests/all/polyglot.rs.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Topology } from "../../guest-sdk/js/src/index.js";
import { parseInput, problems, toOutput } from "../../guest-sdk/js/src/testing.js";
import { BalancedAssignor } from "./app.js";

/** @import { Group, Member } from "../../guest-sdk/js/src/model.js" */

/**
 * @param {string} memberId
 * @param {string} processId
 * @returns {Member}
 */
function member(memberId, processId) {
  return {
    memberId, processId, instanceId: undefined, rackId: undefined, clientTags: new Map(),
    activeTasks: [], standbyTasks: [], warmupTasks: [], taskOffsets: [], taskEndOffsets: [],
  };
}

test("the JSON contract's example group gets a valid assignment naming every member", () => {
  const example = new URL("../../runtime/demo/group.json", import.meta.url);
  const { group, topology } = parseInput(readFileSync(example, "utf8"));
  const assignment = new BalancedAssignor().assign(group, topology);
  assert.deepEqual(problems(group, topology, assignment), []);
  const output = toOutput(group, topology, assignment);
  assert.deepEqual(Object.keys(output.members).sort(), group.members.map((m) => m.memberId).sort());
});

test("seven tasks over three members differ by at most one, standbys on other processes", () => {
  /** @type {Group} */
  const group = { members: [member("a", "p1"), member("b", "p1"), member("c", "p2")], numStandbyReplicas: 1, rackAwareAssignmentTags: [] };
  const topology = new Topology([{ id: "orders", partitions: 7, isStateful: true, sourceTopics: [] }]);
  const assignment = new BalancedAssignor().assign(group, topology);
  const counts = assignment.activeByMember().map((tasks) => tasks.length);
  assert.ok(Math.max(...counts) - Math.min(...counts) <= 1);
  assert.deepEqual(problems(group, topology, assignment), []);
  assert.equal(assignment.standby.length, 7);
});

test("with a single process no standby is placed", () => {
  /** @type {Group} */
  const group = { members: [member("a", "p"), member("b", "p")], numStandbyReplicas: 2, rackAwareAssignmentTags: [] };
  const topology = new Topology([{ id: "s", partitions: 2, isStateful: true, sourceTopics: [] }]);
  const assignment = new BalancedAssignor().assign(group, topology);
  assert.deepEqual(assignment.standbyByMember(), [[], []]);
});

test("a group without members gets an empty assignment, not an error", () => {
  const topology = new Topology([{ id: "s", partitions: 3, isStateful: false, sourceTopics: [] }]);
  const assignment = new BalancedAssignor().assign({ members: [], numStandbyReplicas: 0, rackAwareAssignmentTags: [] }, topology);
  assert.deepEqual(assignment.activeByMember(), []);
});
