//! What a plan's messages cost: how many were sent, and in how many sequential rounds (issue
//! 53). A round is one wait on the network: the messages of a batch sent to every site at once
//! and awaited together count as one round, a message sent after another's answer as a round
//! of its own. Across a wide-area network a plan's planning time is about its rounds times the
//! round-trip time, whatever its message count.

use crate::model::Outcome;

/// Messages sent and sequential rounds they took (see the module docs).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    /// Participant messages (LIS and NIS: queries, prepares, commits, aborts, ...).
    pub(crate) messages: u64,
    /// Sequential rounds (the GIS's catalogue is one, though it is no participant message).
    pub(crate) rounds: u64,
}

impl Sent {
    /// What `outcome` says was sent so far.
    pub(crate) fn of(outcome: &Outcome) -> Sent {
        Sent { messages: outcome.messages, rounds: outcome.rounds }
    }

    /// Writes the counts into `outcome`.
    pub(crate) fn write_to(self, outcome: &mut Outcome) {
        outcome.messages = self.messages;
        outcome.rounds = self.rounds;
    }

    /// `n` messages sent at once and awaited together: one round (none for `n` = 0).
    pub(crate) fn together(&mut self, n: u64) {
        self.messages += n;
        self.rounds += u64::from(n > 0);
    }

    /// One message, awaited before anything else is sent: one round.
    pub(crate) fn one(&mut self) {
        self.together(1);
    }

    /// `n` messages sent one after the other's answer: `n` rounds.
    pub(crate) fn one_by_one(&mut self, n: u64) {
        self.messages += n;
        self.rounds += n;
    }

    /// A wait on a service that is no participant (the GIS): a round, no message.
    pub(crate) fn round(&mut self) {
        self.rounds += 1;
    }

    /// `other`'s messages, sent after this one's.
    pub(crate) fn then(&mut self, other: Sent) {
        self.messages += other.messages;
        self.rounds += other.rounds;
    }

    /// Sent at the same time as this: messages add up, rounds are the longer of the two.
    pub(crate) fn beside(&mut self, other: Sent) {
        self.messages += other.messages;
        self.rounds = self.rounds.max(other.rounds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn together_is_one_round_one_by_one_is_one_each() {
        let mut s = Sent::default();
        s.together(5);
        s.together(0);
        assert_eq!(s, Sent { messages: 5, rounds: 1 });
        s.one_by_one(3);
        s.one();
        s.round();
        assert_eq!(s, Sent { messages: 9, rounds: 6 });
        let mut a = Sent { messages: 2, rounds: 2 };
        a.beside(Sent { messages: 3, rounds: 1 });
        assert_eq!(a, Sent { messages: 5, rounds: 2 });
        a.then(Sent { messages: 1, rounds: 1 });
        assert_eq!(a, Sent { messages: 6, rounds: 3 });
    }
}
