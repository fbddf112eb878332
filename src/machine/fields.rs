//! The machine's numbers by [`Field`]: what `Machine.get` returns at the boundary, and what the
//! driver writes a stored record from (each record field's row names the [`Field`] it is read by).

use super::send::Machine;
use crate::contract::Field;

impl Machine {
    /// One number of the action's payload or outcome, or of the record, by [`Field`] (booleans as
    /// 1/0). An exhaustive match: a field added to the table has to be given its value here.
    pub fn field(&self, field: Field) -> f64 {
        let flag = |b: bool| f64::from(u8::from(b));
        let record = self.record();
        match field {
            Field::TimeoutMs => self.timeout_ms() as f64,
            Field::DelayMs => self.delay_ms() as f64,
            Field::Reason => self.reason().map_or(0, super::RetryReason::index).into(),
            Field::Attempt => self.attempt().into(),
            Field::TotalAttempts => record.attempts.into(),
            Field::Status => self.status().into(),
            Field::Ok => flag(self.ok()),
            Field::Replayed => flag(self.replayed()),
            Field::ErrorCode => self.error().code.into(),
            Field::ErrorDetail => self.error().detail.into(),
            Field::CreatedAt => record.created_at as f64,
            Field::UpdatedAt => record.updated_at as f64,
            Field::LastStatus => record.last_status.into(),
            Field::Uncertain => flag(self.uncertain()),
            Field::Brought => flag(record.brought),
            Field::Dirty => flag(self.dirty()),
            Field::State => (record.state as u8).into(),
            Field::Resumed => (self.resumed_from() as u8).into(),
        }
    }

    /// The numbers `Engine.load` takes for this machine's record (by `FIELD_*` number, slot 0
    /// unused), as the driver writes and reads them back: each record field from the [`Field`] its
    /// row names (the state as its index), an optional number without a value as
    /// [`crate::contract::NO_STATUS`], the version as given (the driver's own); the other strings
    /// are not numbers (0). For native rigs that stand in for the driver.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn stored_numbers(&self, version: u8) -> [f64; crate::contract::RECORD_SLOTS] {
        let mut numbers = [0.0; crate::contract::RECORD_SLOTS];
        numbers[usize::from(crate::contract::field::VERSION)] = version.into();
        for row in crate::contract::record_fields() {
            // The driver's own fields have no `Field`; the state crosses as its index.
            let Some(read) = row.read else { continue };
            let value = self.field(read);
            numbers[usize::from(row.number)] =
                if row.kind == "number?" && value == 0.0 { f64::from(crate::contract::NO_STATUS) } else { value };
        }
        numbers
    }
}
