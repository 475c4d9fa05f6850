//! Fragment and row ids (FORMAT.md §6, "Row ids"): the counters a commit assigns from,
//! the main chain's range and the branches' blocks.

/// The row ids of the main chain lie below this; above it, each branch has a block of
/// [`ROW_ID_BLOCK`] ids of its own (FORMAT.md §6), so no two chains assign one id.
pub const MAIN_ROW_IDS: u64 = 1 << 62;

/// The row ids of one branch's block.
pub const ROW_ID_BLOCK: u64 = 1 << 40;

/// Branches' blocks: `MAIN_ROW_IDS + k * ROW_ID_BLOCK` for `k` below this.
pub const ROW_ID_BLOCKS: u64 = (i64::MAX as u64 - MAIN_ROW_IDS) / ROW_ID_BLOCK;

/// The first id of branch block `k`.
pub(crate) fn row_id_block_start(k: u64) -> u64 {
    MAIN_ROW_IDS + k * ROW_ID_BLOCK
}

/// The field ids the main chain's schema changes assign lie below this; above it, each
/// branch has a block of [`FIELD_ID_BLOCK`] of its own (its row-id block's number), so a
/// column a branch adds keeps its id when merged (its files name it) and never takes an
/// id the target, or another branch, gave a column. Iceberg's ids are `i32`: the last
/// block ends below `2^31`.
pub const MAIN_FIELD_IDS: u32 = 1 << 24;

/// The field ids of one branch's block. Its last is never given, so the counter of a
/// used-up block stays inside it (and says which block it is).
pub const FIELD_ID_BLOCK: u32 = 256;

/// The first field id of branch block `k`.
pub(crate) fn field_id_block_start(k: u64) -> u32 {
    MAIN_FIELD_IDS + k as u32 * FIELD_ID_BLOCK
}

/// The end (exclusive) of the field ids given in the block `id` is in: its last id, never
/// given. Two ids (or counters) are of one block when their ends are equal.
pub(crate) fn field_id_block_end(id: u32) -> u32 {
    match id.checked_sub(MAIN_FIELD_IDS) {
        None => MAIN_FIELD_IDS - 1,
        Some(above) => MAIN_FIELD_IDS + (above / FIELD_ID_BLOCK + 1) * FIELD_ID_BLOCK - 1,
    }
}

/// Whether the chain of `schema` (its block of field ids: FORMAT.md §7) has ids left
/// for a field of type `column_type` (and its nested fields).
pub(crate) fn field_ids_left_for(schema: &crate::format::schema::Schema, column_type: &crate::format::schema::ColumnType) -> bool {
    let mut next = schema.next_field_id + 1;
    column_type.clone().assign_ids(&mut next);
    next <= field_id_block_end(schema.next_field_id)
}

/// The ids a commit assigns next: fragment ids (of the chain) and row ids (of the
/// chain's block). Both only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextIds {
    /// The id the next fragment gets.
    pub fragment: u64,
    /// The id the next fragment's first row gets.
    pub row: u64,
}

impl NextIds {
    /// The next fragment's id and first row id, for a fragment of `rows` rows; `None`
    /// when its rows' ids would leave the chain's block (the last id of each is never
    /// assigned, so the counter always names its block).
    pub fn assign(&mut self, rows: u64) -> Option<(u64, u64)> {
        let end =
            if self.row < MAIN_ROW_IDS { MAIN_ROW_IDS - 1 } else { row_id_block_start((self.row - MAIN_ROW_IDS) / ROW_ID_BLOCK + 1) - 1 };
        let next_row = self.row.checked_add(rows).filter(|&n| n <= end)?;
        let assigned = (self.fragment, self.row);
        (self.fragment, self.row) = (self.fragment + 1, next_row);
        Some(assigned)
    }

    /// The next fragment's id, for a fragment whose rows keep ids from elsewhere (a
    /// branch merge): the row counter does not move.
    pub fn take_fragment_id(&mut self) -> u64 {
        self.fragment += 1;
        self.fragment - 1
    }

    /// The larger of each counter (a restore keeps both growing).
    pub fn max(self, other: NextIds) -> NextIds {
        NextIds { fragment: self.fragment.max(other.fragment), row: self.row.max(other.row) }
    }
}
