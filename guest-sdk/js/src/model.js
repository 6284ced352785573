/**
 * The domain model an assignor sees: plain objects over the WIT's index tables.
 *
 * The WIT sends everything that repeats once and refers to it by index (parallel integer
 * lists, member and process tables) so that large groups cross the sandbox boundary cheaply.
 * This module turns that back into what an author expects: members with their process, tags
 * and current tasks, a topology with its subtopologies, and an {@link Assignment} to fill in.
 *
 * @module
 */

/**
 * A task: partition `partition` of the subtopology at index `subtopology` in
 * {@link Topology#subtopologies} (Kafka's `TaskId`, `<subtopology id>_<partition>`).
 *
 * @typedef {{ subtopology: number, partition: number }} Task
 */

/**
 * A source topic of a subtopology, with the racks holding each partition's replicas.
 *
 * @typedef {object} SourceTopic
 * @property {string} name
 * @property {number} partitions
 * @property {Map<number, string[]>} partitionRacks partition → racks holding a replica of it
 */

/**
 * One subtopology: `partitions` tasks, numbered `0 .. partitions`.
 *
 * @typedef {object} Subtopology
 * @property {string} id
 * @property {number} partitions
 * @property {boolean} isStateful whether it has a changelog, so its tasks may have standbys
 * @property {SourceTopic[]} sourceTopics
 */

/**
 * A member of the group with its static metadata and its current tasks.
 *
 * @typedef {object} Member
 * @property {string} memberId
 * @property {string} processId the Streams client (JVM) it runs in; its members share state
 * @property {string | undefined} instanceId
 * @property {string | undefined} rackId
 * @property {Map<string, string>} clientTags
 * @property {Task[]} activeTasks
 * @property {Task[]} standbyTasks
 * @property {Task[]} warmupTasks
 * @property {Array<[Task, bigint]>} taskOffsets last reported changelog offsets
 * @property {Array<[Task, bigint]>} taskEndOffsets last reported changelog end offsets
 */

/**
 * Kafka's `GroupSpec`: the members, in the order the coordinator sent them, and the resolved
 * assignment configs.
 *
 * @typedef {object} Group
 * @property {Member[]} members
 * @property {number} numStandbyReplicas
 * @property {string[]} rackAwareAssignmentTags
 */

/** The group's topology (Kafka's `TopologyDescriber`). */
export class Topology {
  /** @param {Subtopology[]} subtopologies */
  constructor(subtopologies) {
    /** @type {Subtopology[]} */
    this.subtopologies = subtopologies;
  }

  /**
   * Every task, subtopology by subtopology, partitions in order.
   *
   * @returns {Generator<Task>}
   */
  *tasks() {
    for (const [subtopology, s] of this.subtopologies.entries()) {
      for (let partition = 0; partition < s.partitions; partition++) {
        yield { subtopology, partition };
      }
    }
  }

  /**
   * Whether `task` belongs to a stateful subtopology (so it may have standbys).
   *
   * @param {Task} task
   * @returns {boolean}
   */
  isStateful(task) {
    return this.subtopologies[task.subtopology].isStateful;
  }

  /**
   * The task as Kafka users know it: `<subtopology id>_<partition>`.
   *
   * @param {Task} task
   * @returns {string}
   */
  taskName(task) {
    return `${this.subtopologies[task.subtopology].id}_${task.partition}`;
  }
}

/**
 * The new target assignment being built: per member (by its index in `group.members`), the
 * active and standby tasks. Adding a task twice to one member is a duplicate the runtime
 * rejects; members given nothing get nothing.
 *
 * Entries are kept as the WIT sends them, in parallel typed arrays that grow by doubling:
 * the component's JavaScript engine is an interpreter in which an object per task, or a call
 * to a built-in such as `Array.prototype.push` per task, costs more than the algorithm itself.
 */
export class Assignment {
  /** @param {Group} group an empty assignment for every member of it */
  constructor(group) {
    /** How many members the group has. */
    this.size = group.members.length;
    this.active = new Entries();
    this.standby = new Entries();
  }

  /**
   * Makes partition `partition` of subtopology `subtopology` active on the member at index
   * `member`.
   *
   * @param {number} member
   * @param {number} subtopology
   * @param {number} partition
   */
  addActive(member, subtopology, partition) {
    this.active.push(member, subtopology, partition);
  }

  /**
   * Gives the member at index `member` a standby of partition `partition` of subtopology
   * `subtopology`.
   *
   * @param {number} member
   * @param {number} subtopology
   * @param {number} partition
   */
  addStandby(member, subtopology, partition) {
    this.standby.push(member, subtopology, partition);
  }

  /**
   * The active tasks of each member, in the order they were added (for tests and reports).
   *
   * @returns {Task[][]}
   */
  activeByMember() {
    return this.active.byMember(this.size);
  }

  /**
   * The standby tasks of each member, in the order they were added.
   *
   * @returns {Task[][]}
   */
  standbyByMember() {
    return this.standby.byMember(this.size);
  }
}

/**
 * Parallel lists as the WIT has them: entry `i` is partition `partitions[i]` of subtopology
 * `subtopologies[i]`, on member `members[i]`, for `i < length`.
 */
export class Entries {
  constructor() {
    this.length = 0;
    this.members = new Uint32Array(64);
    this.subtopologies = new Uint32Array(64);
    this.partitions = new Uint32Array(64);
  }

  /**
   * Appends an entry.
   *
   * @param {number} member
   * @param {number} subtopology
   * @param {number} partition
   */
  push(member, subtopology, partition) {
    if (this.length === this.members.length) this.grow();
    this.members[this.length] = member;
    this.subtopologies[this.length] = subtopology;
    this.partitions[this.length] = partition;
    this.length++;
  }

  /** Doubles the capacity. */
  grow() {
    /** @param {Uint32Array} old */
    const doubled = (old) => {
      const bigger = new Uint32Array(old.length * 2);
      bigger.set(old);
      return bigger;
    };
    this.members = doubled(this.members);
    this.subtopologies = doubled(this.subtopologies);
    this.partitions = doubled(this.partitions);
  }

  /**
   * The entries grouped by member.
   *
   * @param {number} size how many members there are
   * @returns {Task[][]}
   */
  byMember(size) {
    /** @type {Task[][]} */
    const out = Array.from({ length: size }, () => []);
    for (let i = 0; i < this.length; i++) {
      out[this.members[i]].push({ subtopology: this.subtopologies[i], partition: this.partitions[i] });
    }
    return out;
  }
}

/**
 * Thrown by an assignor that cannot compute an assignment: the call fails with this message
 * (a `guest-error`) and the group keeps its previous target assignment.
 */
export class AssignError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "AssignError";
  }
}

/** Matches a UTF-16 surrogate: where code-unit order and code-point order can differ. */
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Compares two ids as the Rust runtime and SDK order them (by Unicode code point, which is
 * UTF-8 byte order), not by UTF-16 code unit as `<` and `Array.prototype.sort` do. The two
 * orders differ only around surrogates, so ids without any take the built-in comparison: in
 * the component's interpreter, walking the code points costs more than the whole sort.
 *
 * @param {string} a
 * @param {string} b
 * @returns {number}
 */
export function compareIds(a, b) {
  if (!SURROGATE.test(a) && !SURROGATE.test(b)) return a < b ? -1 : a > b ? 1 : 0;
  const left = a[Symbol.iterator]();
  const right = b[Symbol.iterator]();
  for (;;) {
    const x = left.next();
    const y = right.next();
    if (x.done || y.done) return (x.done ? 0 : 1) - (y.done ? 0 : 1);
    const d = /** @type {number} */ (x.value.codePointAt(0)) - /** @type {number} */ (y.value.codePointAt(0));
    if (d !== 0) return d;
  }
}
