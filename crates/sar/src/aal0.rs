//! AAL0: raw 48-byte payloads, one per cell, with no framing or checks
//! beyond the link's HEC. Useful for cell-level experiments (VuNet's camera
//! and switch control traffic used raw cells).

use std::collections::HashSet;

use aurora_wire::cell::{Format, Header, VcId};
use aurora_wire::{CellBytes, PayloadBytes, HEADER_LEN, PAYLOAD_LEN};

use crate::counters::{DropReason, RxStats};
use crate::TxError;

/// The AAL0 sender of one VC.
#[derive(Clone, Debug)]
pub struct Aal0Tx {
    header: [u8; HEADER_LEN],
}

impl Aal0Tx {
    /// A sender for `vc` with headers in `format`.
    pub fn new(vc: VcId, format: Format) -> Result<Self, TxError> {
        let header = crate::user_header(vc, format)?;
        Ok(Aal0Tx { header })
    }

    /// Cuts `data` into 48-byte payloads (the last one zero-filled) and writes
    /// one cell per payload into `out`. Returns the number of cells.
    pub fn segment_into(&self, data: &[u8], out: &mut [CellBytes]) -> Result<usize, TxError> {
        let n = data.len().div_ceil(PAYLOAD_LEN);
        if out.len() < n {
            return Err(TxError::NoRoom {
                need: n,
                have: out.len(),
            });
        }
        for (cell, chunk) in out.iter_mut().zip(data.chunks(PAYLOAD_LEN)) {
            cell[..HEADER_LEN].copy_from_slice(&self.header);
            cell[HEADER_LEN..HEADER_LEN + chunk.len()].copy_from_slice(chunk);
            cell[HEADER_LEN + chunk.len()..].fill(0);
        }
        Ok(n)
    }
}

/// The AAL0 receiver: hands over the payload of every user cell on an open VC.
#[derive(Clone, Debug, Default)]
pub struct Aal0Rx {
    format: Format,
    vcs: HashSet<VcId>,
    stats: RxStats,
}

impl Aal0Rx {
    /// A receiver for cells with headers in `format`.
    pub fn new(format: Format) -> Self {
        Aal0Rx {
            format,
            ..Default::default()
        }
    }

    /// Opens a VC.
    pub fn open_vc(&mut self, vc: VcId) {
        self.vcs.insert(vc);
    }

    /// Totals so far (every cell is its own PDU).
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// Calls `deliver` with the VC and payload of each user cell on an open VC.
    pub fn push(&mut self, cells: &[CellBytes], mut deliver: impl FnMut(VcId, &PayloadBytes)) {
        for cell in cells {
            self.stats.cells_in += 1;
            let h = Header::parse(&[cell[0], cell[1], cell[2], cell[3]], self.format);
            let reason = if !h.pti.is_user() {
                DropReason::NotUserData
            } else if !self.vcs.contains(&h.vc()) {
                DropReason::UnknownVc
            } else {
                self.stats.cells_delivered += 1;
                self.stats.pdus_delivered += 1;
                let p: &PayloadBytes = cell[HEADER_LEN..].try_into().expect("48 bytes");
                deliver(h.vc(), p);
                continue;
            };
            self.stats.cells_dropped.add(reason, 1);
            self.stats.pdus_dropped.add(reason, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_cells_round_trip_and_strangers_are_counted() {
        let vc = VcId::new(0, 77);
        let tx = Aal0Tx::new(vc, Format::Uni).unwrap();
        let data: Vec<u8> = (0..100u8).collect();
        let mut cells = [[0u8; 53]; 3];
        assert_eq!(tx.segment_into(&data, &mut cells).unwrap(), 3);
        let mut rx = Aal0Rx::new(Format::Uni);
        rx.open_vc(vc);
        let mut got = Vec::new();
        rx.push(&cells, |_, p| got.extend_from_slice(p));
        assert_eq!(&got[..100], &data[..]);
        assert!(got[100..].iter().all(|&b| b == 0));
        let other = Aal0Tx::new(VcId::new(0, 78), Format::Uni).unwrap();
        other.segment_into(&[1], &mut cells[..1]).unwrap();
        rx.push(&cells[..1], |_, _| panic!("not open"));
        assert_eq!(rx.stats().cells_dropped.get(DropReason::UnknownVc), 1);
    }
}
