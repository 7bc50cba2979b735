import RingsideHTTPClient

/// Passwords, on the loop: each request is checked against the web configuration's users before
/// it is routed; credentials not verified before wait at the `PasswordDesk`, which hands the
/// password worker one check at a time, fairly between clients.
extension ServerLoop {
    /// Starts the response to `request`, after its password when the web configuration asks for
    /// one; false when a worker has it (the connection waits for its answer).
    func answer(
        _ connection: Connection, _ request: HTTPRequest, headOnly: Bool, disposition: ConnectionDisposition, now: Int64
    ) -> Bool {
        guard let security else { return dispatch(connection, request, headOnly: headOnly, disposition: disposition, now: now) }
        security.refresh(now: now, log: log)
        switch security.rules.decide(request, open: security.openPaths, verified: security.verified) {
        case .allow:
            return dispatch(connection, request, headOnly: headOnly, disposition: disposition, now: now)
        case .refuseMissing:
            security.countAuthMissing()
            authFailures.note("no credentials, or not Basic ones", now: now, log: log)
            startResponse(connection, Self.unauthorized, headOnly: headOnly, disposition: disposition, now: now)
            return true
        case .verify(let verification):
            lastTicket += 1
            let ticket = lastTicket
            let (outcome, pushedOut) = desk.ask(ticket: ticket, verification, host: connection.host, now: now)
            for other in pushedOut { refuseUnchecked(ticket: other, now: now) }
            switch outcome {
            case .waiting:
                verifying[ticket] = connection
                connection.phase = .verifying(request, headOnly: headOnly, disposition: disposition)
                connection.deadline = now + verificationWaitMillis
                submitNextCheck(now: now)
                return false
            case .knownWrong:
                security.countAuthWrong()
                authFailures.note("a wrong user or password (one refused before)", now: now, log: log)
                startResponse(connection, Self.unauthorized, headOnly: headOnly, disposition: disposition, now: now)
            case .turnedAway:
                turnAway(connection, headOnly: headOnly, disposition: disposition, now: now)
            }
            return true
        }
    }

    /// Too many checks wait for this client's host and user: come back in a second.
    static let tooManyWaiting = HTTPResponse(
        status: 429,
        text: "429 Too Many Requests: too many passwords from your address are waiting to be checked; retry shortly\n",
        headers: [HTTPHeader("Retry-After", "1")])

    private func turnAway(_ connection: Connection, headOnly: Bool, disposition: ConnectionDisposition, now: Int64) {
        security?.countAuthThrottled()
        throttled.note("too many passwords waiting for their check from one address and user", now: now, log: log)
        startResponse(connection, Self.tooManyWaiting, headOnly: headOnly, disposition: disposition, now: now)
    }

    /// A waiting request the desk pushed out for a retry, or whose wait ran out: `429`.
    private func refuseUnchecked(ticket: UInt64, now: Int64) {
        guard let connection = verifying.removeValue(forKey: ticket), !connection.isClosed,
            case let .verifying(_, headOnly, disposition) = connection.phase
        else { return }
        turnAway(connection, headOnly: headOnly, disposition: disposition, now: now)
        sendAndGoOn(connection, now: now)
    }

    /// Hands the worker the desk's next check when it has none; a check the verified passwords
    /// already answer (another request's came back meanwhile) is answered without it.
    func submitNextCheck(now: Int64) {
        guard let passwords, let security else { return }
        while let job = desk.next(now: now) {
            let verification = job.verification
            let hash = verification.rules.users[verification.user]
            if let hash, security.verified.contains(user: verification.user, hash: hash, password: verification.password) {
                answerChecked(desk.finish(id: job.id, matched: true, now: now), matched: true, now: now)
                continue
            }
            passwords.submit(.init(ticket: job.id, input: verification))
            return
        }
    }

    /// Answers the requests whose check came back: routed when the password matched, else `401`.
    func deliverPasswordChecks(now: Int64) {
        guard let passwords else { return }
        for answer in passwords.takeAnswers() {
            answerChecked(desk.finish(id: answer.ticket, matched: answer.output, now: now), matched: answer.output, now: now)
        }
        submitNextCheck(now: now)
    }

    private func answerChecked(_ tickets: [UInt64], matched: Bool, now: Int64) {
        for ticket in tickets {
            guard let connection = verifying.removeValue(forKey: ticket), !connection.isClosed,
                case let .verifying(request, headOnly, disposition) = connection.phase
            else { continue }
            if matched {
                guard dispatch(connection, request, headOnly: headOnly, disposition: disposition, now: now) else { continue }
            } else {
                security?.countAuthWrong()
                authFailures.note("a wrong user or password", now: now, log: log)
                startResponse(connection, Self.unauthorized, headOnly: headOnly, disposition: disposition, now: now)
            }
            sendAndGoOn(connection, now: now)
        }
    }

    /// Sends what the socket takes of the response just started; once all is sent, goes on with
    /// the connection's next request.
    private func sendAndGoOn(_ connection: Connection, now: Int64) {
        if connection.flush(slice: writeSlice) {
            finishResponse(connection, now: now)
            process(connection, now: now)
        }
    }

    /// The connection waited too long for its check: a best-effort `429`, and it closes.
    func giveUpCheck(_ connection: Connection, now: Int64) {
        withdrawCheck(of: connection)
        security?.countAuthThrottled()
        throttled.note("no password check within \(verificationWaitMillis / 1000) s", now: now, log: log)
        let bytes = encodedBytes(Self.tooManyWaiting)
        _ = bytes.withUnsafeBytes { connection.send($0) }
    }

    /// Takes the connection's request off the desk (it closed, or gave up).
    func withdrawCheck(of connection: Connection) {
        guard let ticket = verifying.first(where: { $0.value === connection })?.key else { return }
        verifying[ticket] = nil
        desk.withdraw(ticket: ticket)
    }
}
