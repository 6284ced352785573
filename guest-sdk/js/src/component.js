/**
 * The glue between an assignor class and the component's WIT export.
 *
 * The component is built with every WASI feature of componentize-js disabled: it imports no
 * WASI at all (the runtime grants none that an assignor could use), so `console` would write
 * nowhere. Each call collects what `console` prints instead, and a failed call carries its tail
 * in the error message: `console.log` debugging works, and an uncaught exception arrives as a
 * `guest-error` with its stack rather than as a bare trap.
 *
 * @module
 */

import { AssignError, Topology } from "./model.js";

/** @import { TaskAssignor } from "./assignor.js" */
/** @import { Assignment, Entries, Group, Member, SourceTopic } from "./model.js" */

/** Most characters of printed output and stack a failed call's message keeps. */
export const MESSAGE_TAIL_CHARS = 3000;

/**
 * The object to export as `taskAssignor` from the component's module, over one
 * `new Assignor()`: `export const taskAssignor = exportAssignor(MyAssignor);`.
 *
 * The host runs every call in a fresh component instance and calls `configure` in it before
 * `assign`, so the instance's configuration is the call's, and nothing else survives.
 *
 * @param {new () => TaskAssignor} Assignor
 * @returns {{ name(): string, configure(config: Array<[string, string]>): void, assign(group: any, topology: any): any }}
 */
export function exportAssignor(Assignor) {
  const assignor = new Assignor();
  return {
    name() {
      return assignor.name();
    },
    configure(config) {
      /** @type {string[]} */
      const printed = [];
      try {
        capturingConsole(printed, () => assignor.configure(new Map(config)));
      } catch (error) {
        // componentize-js lowers a thrown `{ payload }` to the result's error case.
        throw { payload: withOutput(describe(error), printed) };
      }
    },
    assign(group, topology) {
      /** @type {string[]} */
      const printed = [];
      try {
        const assignment = capturingConsole(printed, () =>
          assignor.assign(toGroup(group), toTopology(topology)),
        );
        return fromAssignment(assignment);
      } catch (error) {
        throw { payload: { message: withOutput(describe(error), printed) } };
      }
    },
  };
}

/**
 * Runs `body` with `console`'s output collected into `printed`.
 *
 * @template T
 * @param {string[]} printed
 * @param {() => T} body
 * @returns {T}
 */
function capturingConsole(printed, body) {
  const saved = globalThis.console;
  const collect = (/** @type {unknown[]} */ ...args) => {
    printed.push(args.map(String).join(" "));
  };
  globalThis.console = /** @type {Console} */ (
    /** @type {unknown} */ ({ log: collect, info: collect, warn: collect, error: collect, debug: collect })
  );
  try {
    return body();
  } finally {
    globalThis.console = saved;
  }
}

/**
 * An exception as a message: an `AssignError`'s or another `Error`'s own message (the stack
 * too for anything but `AssignError`), or the thrown value as text.
 *
 * @param {unknown} error
 * @returns {string}
 */
function describe(error) {
  if (error instanceof AssignError) return error.message;
  if (error instanceof Error) return error.stack ? `${error}\n${error.stack}` : String(error);
  return String(error);
}

/**
 * `message` after what the call printed, cut to its last {@link MESSAGE_TAIL_CHARS}.
 *
 * @param {string} message
 * @param {string[]} printed
 * @returns {string}
 */
function withOutput(message, printed) {
  const text = printed.length ? `${printed.join("\n")}\n${message}` : message;
  return text.slice(-MESSAGE_TAIL_CHARS);
}

/**
 * The WIT group spec as a {@link Group}: processes, tags and tasks per member.
 *
 * @param {any} spec the generated binding's `group-spec`
 * @returns {Group}
 */
export function toGroup(spec) {
  /** @type {Member[]} */
  const members = spec.members.map((/** @type {any} */ m) => ({
    memberId: m.memberId,
    processId: spec.processes[m.process],
    instanceId: m.instanceId,
    rackId: m.rackId,
    clientTags: new Map(m.clientTags),
    activeTasks: [],
    standbyTasks: [],
    warmupTasks: [],
    taskOffsets: [],
    taskEndOffsets: [],
  }));
  for (const [field, tasks] of /** @type {const} */ ([
    ["activeTasks", spec.activeTasks],
    ["standbyTasks", spec.standbyTasks],
    ["warmupTasks", spec.warmupTasks],
  ])) {
    for (let i = 0; i < tasks.members.length; i++) {
      members[tasks.members[i]][field].push({
        subtopology: tasks.subtopologies[i],
        partition: tasks.partitions[i],
      });
    }
  }
  for (const [field, offsets] of /** @type {const} */ ([
    ["taskOffsets", spec.taskOffsets],
    ["taskEndOffsets", spec.taskEndOffsets],
  ])) {
    for (let i = 0; i < offsets.members.length; i++) {
      const task = { subtopology: offsets.subtopologies[i], partition: offsets.partitions[i] };
      members[offsets.members[i]][field].push([task, BigInt(offsets.offsets[i])]);
    }
  }
  return {
    members,
    numStandbyReplicas: spec.configs.numStandbyReplicas,
    rackAwareAssignmentTags: [...spec.configs.rackAwareAssignmentTags],
  };
}

/**
 * The WIT topology as a {@link Topology}, rack indices resolved to names.
 *
 * @param {any} topology the generated binding's `topology`
 * @returns {Topology}
 */
export function toTopology(topology) {
  return new Topology(
    topology.subtopologies.map((/** @type {any} */ s) => ({
      id: s.id,
      partitions: s.maxNumInputPartitions,
      isStateful: s.isStateful,
      sourceTopics: s.sourceTopics.map((/** @type {any} */ t) => {
        /** @type {Map<number, string[]>} */
        const racks = new Map();
        for (let i = 0; i < t.replicaPartitions.length; i++) {
          const partition = t.replicaPartitions[i];
          racks.set(partition, [...(racks.get(partition) ?? []), topology.racks[t.replicaRacks[i]]]);
        }
        return /** @type {SourceTopic} */ ({ name: t.name, partitions: t.partitions, partitionRacks: racks });
      }),
    })),
  );
}

/**
 * An {@link Assignment} as the WIT's parallel lists: views of its typed arrays, which the
 * bindings copy as one block each (a plain array is lowered element by element, at ~25 times
 * the fuel).
 *
 * @param {Assignment} assignment
 * @returns {any} the generated binding's `group-assignment`
 */
export function fromAssignment(assignment) {
  /** @param {Entries} entries */
  const lists = (entries) => ({
    members: entries.members.subarray(0, entries.length),
    subtopologies: entries.subtopologies.subarray(0, entries.length),
    partitions: entries.partitions.subarray(0, entries.length),
  });
  return { activeTasks: lists(assignment.active), standbyTasks: lists(assignment.standby) };
}
