#!/usr/bin/env ruby
# frozen_string_literal: true

# Conformance runner for the raw Ruby gRPC client generated into sdks/ruby (gems grpc and
# google-protobuf; Debian's ruby-grpc is enough).
#
# Interprets conformance/scenarios.json (format: conformance/README.md) against a running
# Caerus DLS server and prints one line per scenario. Exit status 1 if any scenario failed.

require 'json'
require 'optparse'
require 'securerandom'

HERE = File.expand_path(__dir__)
REPO = File.dirname(File.dirname(HERE))

# How long a step may wait for the server: a guard against a hang, not a timing assertion.
PATIENCE_S = 30.0

options = {
  endpoint: '127.0.0.1:7070',
  api_key: ENV.fetch('CAERUS_API_KEY', nil),
  scenarios: File.join(File.dirname(HERE), 'scenarios.json'),
  only: [],
  sdk_path: File.join(REPO, 'sdks', 'ruby', 'lib')
}
OptionParser.new do |o|
  o.banner = "Runs the Caerus DLS conformance scenarios through the raw Ruby gRPC client (sdks/ruby).\n\n" \
             'usage: runner.rb [options]'
  o.on('--endpoint HOST:PORT', 'any node; leader redirects are followed (default 127.0.0.1:7070)') { |v| options[:endpoint] = v }
  o.on('--api-key KEY', 'sent as authorization: Bearer KEY (default: $CAERUS_API_KEY)') { |v| options[:api_key] = v }
  o.on('--scenarios FILE', 'the scenario file (default: the scenarios.json next to ruby/)') { |v| options[:scenarios] = v }
  o.on('--only NAME', 'run only this scenario (repeatable)') { |v| options[:only] << v }
  o.on('--sdk-path DIR', 'load path holding caerus/dls/v1 (default sdks/ruby/lib)') { |v| options[:sdk_path] = v }
end.parse!
ARGS = options.freeze

$LOAD_PATH.unshift(ARGS[:sdk_path])
require 'grpc'
require 'caerus/dls/v1/lock_service_services_pb'
require 'caerus/dls/v1/admin_service_services_pb'

V1 = Caerus::Dls::V1
CODE_NAMES = GRPC::Core::StatusCodes.constants.to_h { |c| [GRPC::Core::StatusCodes.const_get(c), c.to_s] }.freeze
UNKNOWN = Object.new.freeze
# The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry).
GRANT_CHECKS = %w[mode token_equals token_greater_than save_token].freeze
# What this runner can express of the scenarios' `needs` (README "Capabilities"): a raw
# client sends every field, so it has every capability the file names.
CAPABILITIES = %w[permits].freeze

class StepFailed < StandardError; end

# What a call ended with: a value, or a gRPC status code name and x-dls-error kind.
Outcome = Struct.new(:value, :code, :kind, :message) do
  def ok?
    code.nil?
  end

  def describe
    ok? ? 'ok' : "error #{code}/#{kind || '-'} (#{message})"
  end

  def self.error(err)
    new(nil, CODE_NAMES.fetch(err.code, err.code.to_s), err.metadata['x-dls-error'], err.details)
  end
end

# One channel to the node currently believed to lead; follows x-dls-leader-addr.
class Connection
  def initialize(endpoint, api_key)
    @lock = Mutex.new
    @metadata = api_key ? { 'authorization' => "Bearer #{api_key}" } : {}
    @endpoint = nil
    connect(endpoint)
  end

  def connect(endpoint)
    @lock.synchronize do
      return if endpoint == @endpoint

      @endpoint = endpoint
      @stub = V1::LockService::Stub.new(endpoint, :this_channel_is_insecure)
      @admin = V1::AdminService::Stub.new(endpoint, :this_channel_is_insecure)
    end
  end

  def stub
    @lock.synchronize { @stub }
  end

  def admin
    @lock.synchronize { @admin }
  end

  # UNAVAILABLE means not the leader (follow the hint) or no leader yet (back off).
  def retry?(err, deadline)
    return false if err.code != GRPC::Core::StatusCodes::UNAVAILABLE || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

    leader = err.metadata['x-dls-leader-addr']
    if leader && !leader.empty?
      connect(leader)
    else
      sleep 0.1
    end
    true
  end

  # A LockService call, or an AdminService one (admin: true), following leader changes.
  def unary(method, request, admin: false)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PATIENCE_S
    begin
      service = admin ? self.admin : stub
      Outcome.new(service.public_send(method, request, metadata: @metadata, deadline: Time.now + PATIENCE_S))
    rescue GRPC::BadStatus => e
      retry if retry?(e, deadline)
      Outcome.error(e)
    end
  end

  # Follows the AcquireLock stream (AcquireLocks for an AcquireLocksRequest) to its grant
  # (a Granted, or a LocksGranted) or final status, re-attaching with the same request_id
  # when the serving node stops leading.
  # A stay_open stream is handed to on_stay_open (as a StayOpen) after its grant.
  def acquire(request, on_stay_open = nil, &on_queued)
    method = request.is_a?(V1::AcquireLocksRequest) ? :acquire_locks : :acquire_lock
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + request.timeout_ms / 1000.0 + PATIENCE_S
    return acquire_staying_open(method, request, on_stay_open, deadline, &on_queued) if request.stay_open && on_stay_open

    begin
      stub.public_send(method, request, metadata: @metadata).each do |msg|
        case msg.event
        when :queued then on_queued&.call(msg.queued)
        when :granted then return Outcome.new(msg.granted)
        end
      end
      Outcome.new(nil, 'UNKNOWN', nil, 'stream ended without a grant or a status')
    rescue GRPC::BadStatus => e
      retry if retry?(e, deadline)
      Outcome.error(e)
    end
  end
end

# A granted stay_open acquire stream, read on until it ends: the `lost` message if one came,
# and the status it ended with ('OK' or the error).
class StayOpen
  attr_accessor :op

  def initialize
    @lock = Mutex.new
    @lost = nil
    @ended = nil
    @extra = 0
  end

  def lost=(lost)
    @lock.synchronize { @lost = lost }
  end

  def other
    @lock.synchronize { @extra += 1 }
  end

  def finish(ended)
    @lock.synchronize { @ended = ended }
  end

  # [lost, ended, extra]
  def state
    @lock.synchronize { [@lost, @ended, @extra] }
  end

  def cancel
    @op&.cancel
  rescue StandardError
    nil
  end
end

class Connection
  attr_reader :metadata

  # A stay_open acquire: the whole stream is read by one thread (a gRPC stream enumerator
  # cannot move between threads), which reports queued messages and the grant here, then
  # goes on reading into the StayOpen until the stream ends.
  def acquire_staying_open(method, request, on_stay_open, deadline, &on_queued)
    loop do
      events = Queue.new
      so = StayOpen.new
      so.op = stub.public_send(method, request, metadata: @metadata, return_op: true)
      Thread.new do
        granted = false
        begin
          so.op.execute.each do |msg|
            case msg.event
            when :queued then events << [:queued, msg.queued]
            when :granted
              if granted
                so.other
              else
                granted = true
                events << [:granted, msg.granted]
              end
            when :lost then so.lost = msg.lost
            else so.other
            end
          end
          so.finish('OK')
          events << [:end, nil] unless granted
        rescue GRPC::BadStatus => e
          so.finish(Outcome.error(e).describe)
          events << [:error, e] unless granted
        end
      end
      retrying = false
      until retrying
        kind, value = events.pop
        case kind
        when :queued then on_queued&.call(value)
        when :granted
          on_stay_open.call(so)
          return Outcome.new(value)
        when :end then return Outcome.new(nil, 'UNKNOWN', nil, 'stream ended without a grant or a status')
        when :error
          return Outcome.error(value) unless retry?(value, deadline)

          retrying = true
        end
      end
    end
  end
end

# A WatchKey stream read by a thread: its messages in order, and how it ended.
class KeyWatch
  def initialize(conn, request)
    @lock = Mutex.new
    @cond = ConditionVariable.new
    @messages = []
    @consumed = 0
    @ended = nil
    @op = nil
    @cancelled = false
    Thread.new { run(conn, request) }
  end

  def run(conn, request)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PATIENCE_S
    ended = nil
    loop do
      op = conn.stub.watch_key(request, metadata: conn.metadata, return_op: true)
      @lock.synchronize do
        return if @cancelled

        @op = op
      end
      op.execute.each do |msg|
        @lock.synchronize do
          @messages << msg
          @cond.broadcast
        end
      end
      ended = 'the watch ended (OK)'
      break
    rescue GRPC::BadStatus => e
      none = @lock.synchronize { @messages.empty? }
      next if none && conn.retry?(e, deadline)

      ended = "the watch ended: #{Outcome.error(e).describe}"
      break
    end
    @lock.synchronize do
      @ended = ended
      @cond.broadcast
    end
  end

  def ended
    @lock.synchronize { @ended }
  end

  # The next message not yet consumed (waits for it).
  def next_message
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PATIENCE_S
    @lock.synchronize do
      while @consumed >= @messages.size
        raise StepFailed, @ended if @ended

        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        raise StepFailed, "no key watch message within #{PATIENCE_S.to_i}s" if left <= 0

        @cond.wait(@lock, left)
      end
      @consumed += 1
      @messages[@consumed - 1]
    end
  end

  def cancel
    op = @lock.synchronize do
      @cancelled = true
      @op
    end
    op&.cancel
  rescue StandardError
    nil
  end
end

# A background AcquireLock or AcquireLocks (the step's op: acquire or acquire_all): its queued
# messages and, once over, its outcome.
class Background
  attr_reader :op

  def initialize(conn, op, request, on_stay_open = nil)
    @op = op
    @lock = Mutex.new
    @cond = ConditionVariable.new
    @queued = []
    @consumed = 0
    @outcome = nil
    @thread = Thread.new do
      outcome = conn.acquire(request, on_stay_open) do |q|
        @lock.synchronize do
          @queued << q
          @cond.broadcast
        end
      end
      @lock.synchronize do
        @outcome = outcome
        @cond.broadcast
      end
    end
  end

  def wait_queued(position)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PATIENCE_S
    @lock.synchronize do
      loop do
        while @consumed < @queued.size
          q = @queued[@consumed]
          @consumed += 1
          return q if q.position == position
        end
        if @outcome
          raise StepFailed, "acquire ended (#{@outcome.describe}) before queued position #{position}; " \
                            "positions seen #{@queued.map(&:position)}"
        end
        left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
        if left <= 0
          raise StepFailed, "no queued position #{position} within #{PATIENCE_S.to_i}s; positions seen #{@queued.map(&:position)}"
        end

        @cond.wait(@lock, left)
      end
    end
  end

  def wait_outcome
    @thread.join(PATIENCE_S + 3700)
    @lock.synchronize do
      raise StepFailed, 'background acquire did not finish' unless @outcome

      @outcome
    end
  end
end

# One scenario: its transactions, saved tokens and background acquires.
class Scenario
  def initialize(conn, spec, ns)
    @conn = conn
    @spec = spec
    @ns = ns
    @txns = {}
    @tokens = {}
    @handles = {}
    @watches = {}
    @cursors = {}
    @lost_stream = {} # transactions begun with lost_stream: their acquires stay open
    @streams_lock = Mutex.new
    @streams = Hash.new { |h, k| h[k] = [] } # transaction name -> its granted StayOpen streams
  end

  # ---- values -----------------------------------------------------------------------------
  def text(value)
    return text(value.fetch('repeat')) * value.fetch('times') if value.is_a?(Hash)

    value.gsub('${ns}', @ns)
  end

  def field(step, name, default = '')
    text(step.key?(name) ? step[name] : default)
  end

  def txn_id(step)
    return step['txn_id'] if step.key?('txn_id')

    name = step.fetch('txn')
    @txns.fetch(name) { raise StepFailed, "transaction #{name.inspect} was not begun" }
  end

  # A raw client picks an id itself so that its own retries stay safe.
  def request_id(step)
    step.key?('request_id') ? field(step, 'request_id') : SecureRandom.uuid
  end

  # The wire value of a mode: a LockMode name as a symbol, or a raw number.
  def self.mode(step)
    m = step.fetch('mode', 'EXCLUSIVE')
    m.is_a?(Integer) ? m : V1::LockMode.resolve(m.to_sym) || raise(ArgumentError, "unknown mode #{m}")
  end

  # A mode, state or cause read from a message: a symbol for a known value, else the number.
  def self.name_of(value)
    value.to_s
  end

  def token(name)
    @tokens.fetch(name) { raise StepFailed, "no saved token #{name.inspect}" }
  end

  # ---- checks -----------------------------------------------------------------------------
  # Compares success/failure with `expect`; returns the ok checks (nil for an expected error).
  def check_outcome(step, outcome)
    expect = step.fetch('expect', { 'ok' => {} })
    if expect.key?('error')
      want = expect['error']
      raise StepFailed, "expected error #{want['code']}/#{want['kind']}, got ok" if outcome.ok?
      if outcome.code != want['code'] || outcome.kind != want['kind']
        raise StepFailed, "expected error #{want['code']}/#{want['kind']}, got #{outcome.describe}"
      end
      if want.key?('message_contains') && !outcome.message.to_s.include?(want['message_contains'])
        raise StepFailed, "expected error #{want['code']}/#{want['kind']} saying #{want['message_contains'].inspect}, " \
                          "got #{outcome.describe}"
      end

      return nil
    end
    raise StepFailed, "expected ok, got #{outcome.describe}" unless outcome.ok?

    expect.fetch('ok', {})
  end

  def eq(what, got, want)
    raise StepFailed, "#{what}: expected #{want.inspect}, got #{got.inspect}" unless got == want
  end

  def check_grant(checks, grant)
    eq('mode', Scenario.name_of(grant.mode), checks['mode']) if checks.key?('mode')
    eq('fencing token', grant.fencing_token, token(checks['token_equals'])) if checks.key?('token_equals')
    if checks.key?('token_greater_than')
      floor = token(checks['token_greater_than'])
      unless grant.fencing_token > floor
        raise StepFailed, "fencing token #{grant.fencing_token} is not greater than #{checks['token_greater_than']}=#{floor}"
      end
    end
    @tokens[checks['save_token']] = grant.fencing_token if checks.key?('save_token')
  end

  # acquire_all's `locks` check against the grants in the order asked; each entry's saved
  # token is stored before the next entry is checked.
  def check_grants(checks, granted)
    return unless checks.key?('locks')

    want = checks['locks']
    got = granted.locks.map { |g| "#{g.key}:#{Scenario.name_of(g.mode)}##{g.fencing_token}" }
    raise StepFailed, "locks: expected #{want.size} grants, got #{got}" unless want.size == granted.locks.size

    want.zip(granted.locks).each_with_index do |(w, g), i|
      eq("locks[#{i}] lock", [g.namespace, g.key], [field(w, 'namespace', '${ns}'), text(w.fetch('key'))])
      begin
        check_grant(w, g)
      rescue StepFailed => e
        raise StepFailed, "locks[#{i}]: #{e.message}"
      end
    end
  end

  # The ok checks of an acquire (one Granted) or acquire_all (a LocksGranted).
  def check_acquired(op, checks, value)
    op == 'acquire_all' ? check_grants(checks, value) : check_grant(checks, value)
  end

  def check_downgrade(checks, answer)
    eq('held', answer.held, checks['held']) if checks.key?('held')
    if answer.held
      check_grant(checks, answer.lock)
    elsif GRANT_CHECKS.any? { |c| checks.key?(c) }
      raise StepFailed, 'grant checks on a lock that is not held (held=false)'
    end
  end

  def check_verify(checks, answer)
    eq('current', answer.current, checks['current']) if checks.key?('current')
    return unless checks.key?('current_tokens')

    # Sorted, so the holders compare as a set.
    eq('current_tokens', answer.current_tokens.to_a.sort, checks['current_tokens'].map { |n| token(n) }.sort)
  end

  def check_status(checks, status)
    eq('state', Scenario.name_of(status.state), checks['state']) if checks.key?('state')
    eq('name', status.name, text(checks['name'])) if checks.key?('name')
    eq('priority', status.priority, checks['priority']) if checks.key?('priority')
    eq('lease_timeout_ms', status.lease_timeout_ms, checks['lease_timeout_ms']) if checks.key?('lease_timeout_ms')
    if checks.key?('end_cause')
      eq('end_cause', Scenario.name_of(status.end_cause).delete_prefix('END_CAUSE_'), checks['end_cause'])
    end
    check_locks(checks['locks'], status.locks) if checks.key?('locks')
    check_waiting(checks['waiting'], status.waiting) if checks.key?('waiting')
  end

  def check_locks(wanted, held)
    got = held.map { |h| [h.namespace, h.key, Scenario.name_of(h.mode), h.fencing_token] }.sort_by { |g| g.map(&:to_s) }
    want = wanted.map do |w|
      [field(w, 'namespace', '${ns}'), text(w.fetch('key')), w.fetch('mode'), w.key?('token') ? token(w['token']) : UNKNOWN]
    end
    unmatched = got.dup
    want.each do |w|
      i = unmatched.index { |g| g[0, 3] == w[0, 3] && (w[3].equal?(UNKNOWN) || g[3] == w[3]) }
      raise StepFailed, "locks: expected #{show(want)}, got #{show(got)}" if i.nil?

      unmatched.delete_at(i)
    end
    raise StepFailed, "locks: expected #{show(want)}, got #{show(got)}" unless unmatched.empty?
  end

  def check_waiting(want, waiting)
    if want.nil?
      raise StepFailed, "expected no pending wait, got #{waiting.key} at #{waiting.position}" if waiting

      return
    end
    raise StepFailed, 'expected a pending wait, got none' unless waiting

    eq('waiting.key', waiting.key, text(want.fetch('key')))
    eq('waiting.namespace', waiting.namespace, field(want, 'namespace', '${ns}'))
    eq('waiting.mode', Scenario.name_of(waiting.mode), want['mode']) if want.key?('mode')
    eq('waiting.position', waiting.position, want['position']) if want.key?('position')
  end

  def show(locks)
    locks.map { |_, k, m, t| "#{k}:#{m}#{t.equal?(UNKNOWN) ? '' : "##{t}"}" }
  end

  # list_key's checks on the key's ListLocks entry (nil: the key is not listed, so it has no
  # holders, waiters or delay).
  def check_listed(checks, key)
    eq('listed', !key.nil?, checks['listed']) if checks.key?('listed')
    %w[holders waiters].each do |field|
      next unless checks.key?(field)

      got = key ? key.public_send(field).to_a : []
      shown = got.map { |e| "txn #{e.transaction_id} #{Scenario.name_of(e.mode)}" }
      raise StepFailed, "number of #{field}: expected #{checks[field].size}, got #{shown}" if got.size != checks[field].size

      checks[field].zip(got).each_with_index do |(want, entry), i|
        what = "#{field}[#{i}]"
        eq("#{what} transaction (want #{want['txn']})", entry.transaction_id, txn_id(want)) if want.key?('txn')
        eq("#{what} mode", Scenario.name_of(entry.mode), want['mode']) if want.key?('mode')
        eq("#{what} fencing token (want #{want['token']})", entry.fencing_token, token(want['token'])) if want.key?('token')
      end
    end
    return unless checks.key?('delay')

    until_ms = key ? key.delayed_until_ms : 0
    by = key ? key.delayed_by_transaction_id : 0
    cause = key ? Scenario.name_of(key.delay_cause).delete_prefix('END_CAUSE_') : 'UNSPECIFIED'
    shown = "until #{until_ms} ms by txn #{by} (#{cause})"
    want = checks['delay']
    if want.nil?
      raise StepFailed, "expected no delay, got #{shown}" if until_ms != 0 || by != 0
    elsif until_ms <= 0
      raise StepFailed, "expected a delay, got #{shown}"
    else
      eq("delay transaction (want #{want['txn']})", by, txn_id(want)) if want.key?('txn')
      eq('delay cause', cause, want['cause']) if want.key?('cause')
    end
  end

  # ---- key watches and lost streams -------------------------------------------------------
  def show_holder(holder)
    "txn #{holder.transaction_id} #{holder.transaction_name.inspect} #{Scenario.name_of(holder.mode)}##{holder.fencing_token}"
  end

  def show_change(change)
    cause = Scenario.name_of(change.end_cause).delete_prefix('END_CAUSE_')
    "#{Scenario.name_of(change.kind).delete_prefix('KEY_CHANGE_KIND_')} #{show_holder(change.holder)} (#{cause})"
  end

  def check_holder(what, want, holder)
    if want.key?('txn')
      id = @txns.fetch(want['txn']) { raise StepFailed, "no transaction #{want['txn'].inspect}" }
      eq("#{what} transaction (want #{want['txn']})", holder.transaction_id, id)
    end
    eq("#{what} transaction_name", holder.transaction_name, text(want['name'])) if want.key?('name')
    eq("#{what} mode", Scenario.name_of(holder.mode), want['mode']) if want.key?('mode')
    eq("#{what} fencing token (want #{want['token']})", holder.fencing_token, token(want['token'])) if want.key?('token')
  end

  def check_watch(checks, holders, changes, cursor)
    begin
      if checks.key?('holders')
        raise StepFailed, "holders: expected #{checks['holders'].size}" unless checks['holders'].size == holders.size

        checks['holders'].zip(holders).each_with_index { |(w, h), i| check_holder("holders[#{i}]", w, h) }
      end
      if checks.key?('changes')
        raise StepFailed, "changes: expected #{checks['changes'].size}" unless checks['changes'].size == changes.size

        checks['changes'].zip(changes).each_with_index do |(w, c), i|
          eq("changes[#{i}] kind", Scenario.name_of(c.kind).delete_prefix('KEY_CHANGE_KIND_'), w['kind']) if w.key?('kind')
          if w.key?('end_cause')
            eq("changes[#{i}] end_cause", Scenario.name_of(c.end_cause).delete_prefix('END_CAUSE_'), w['end_cause'])
          end
          check_holder("changes[#{i}]", w, c.holder)
        end
      end
    rescue StepFailed => e
      raise StepFailed, "#{e.message}; holders #{holders.map { |h| show_holder(h) }}, changes #{changes.map { |c| show_change(c) }}"
    end
    @cursors[checks['save_cursor']] = cursor if checks.key?('save_cursor')
  end

  def watch(step)
    @watches.fetch(step.fetch('handle')) { raise StepFailed, "no watch #{step['handle'].inspect}" }
  end

  def stays_open(step)
    @lost_stream.key?(step['txn'])
  end

  # Where a granted stay_open stream of the step's transaction is kept.
  def on_stay_open(step)
    name = step['txn']
    ->(so) { @streams_lock.synchronize { @streams[name] << so } }
  end

  def txn_streams(step)
    @streams_lock.synchronize { @streams[step.fetch('txn')].dup }
  end

  # Polls GetTransactionStatus until the step's ok checks hold, heartbeating first when the
  # step says so; an ended transaction no longer changes, so a mismatch then fails.
  def await_status(step)
    checks = step.fetch('expect', {}).fetch('ok', {})
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + step.fetch('within_ms', PATIENCE_S * 1000) / 1000.0
    loop do
      @conn.unary(:heartbeat, V1::HeartbeatRequest.new(transaction_id: txn_id(step))) if step['heartbeat']
      out = @conn.unary(:get_transaction_status, V1::GetTransactionStatusRequest.new(transaction_id: txn_id(step)))
      raise StepFailed, "status: #{out.describe}" unless out.ok?

      begin
        check_status(checks, out.value)
        return
      rescue StepFailed => e
        state = Scenario.name_of(out.value.state)
        if state != 'ACTIVE' || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
          raise StepFailed, "#{e.message} (state #{state})"
        end
      end
      sleep 0.05
    end
  end

  def expect_lost(step)
    within = step.fetch('within_ms', PATIENCE_S * 1000) / 1000.0
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + within
    lost = nil
    loop do
      streams = txn_streams(step)
      raise StepFailed, 'the transaction has no granted stay_open stream' if streams.empty?

      states = streams.map(&:state)
      lost = states.map(&:first).compact.first
      break if lost
      raise StepFailed, "every stay_open stream ended without lost: #{states.map { |s| s[1] }}" if states.all? { |s| s[1] }
      raise StepFailed, "no lost message within #{(within * 1000).round} ms" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.01
    end
    checks = check_outcome(step, Outcome.new(lost))
    eq('lost.transaction_id', lost.transaction_id, txn_id(step))
    return unless checks&.key?('end_cause')

    eq('lost.end_cause', Scenario.name_of(lost.end_cause).delete_prefix('END_CAUSE_'), checks['end_cause'])
  end

  def expect_streams_closed(step)
    streams = txn_streams(step)
    raise StepFailed, 'the transaction has no granted stay_open stream' if streams.empty?

    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PATIENCE_S
    streams.each_with_index do |so, i|
      lost, ended, extra = so.state
      until ended
        raise StepFailed, "stay_open stream #{i} is still open after #{PATIENCE_S.to_i}s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.01
        lost, ended, extra = so.state
      end
      raise StepFailed, "stay_open stream #{i} sent lost (#{lost.end_cause})" if lost
      raise StepFailed, "stay_open stream #{i} sent #{extra} other messages after its grant" if extra.positive?
      raise StepFailed, "stay_open stream #{i} ended with #{ended}" unless ended == 'OK'
    end
  end

  # ---- steps ------------------------------------------------------------------------------
  def acquire_request(step)
    V1::AcquireLockRequest.new(
      transaction_id: txn_id(step), namespace: field(step, 'namespace', '${ns}'), key: field(step, 'key'),
      mode: Scenario.mode(step), timeout_ms: step.fetch('timeout_ms', 10_000), request_id: request_id(step),
      stay_open: stays_open(step), permits: step.fetch('permits', 0)
    )
  end

  def acquire_all_request(step)
    locks = step.fetch('locks').map do |w|
      V1::LockRequest.new(namespace: field(w, 'namespace', '${ns}'), key: field(w, 'key'), mode: Scenario.mode(w))
    end
    V1::AcquireLocksRequest.new(transaction_id: txn_id(step), locks: locks, timeout_ms: step.fetch('timeout_ms', 10_000),
                                request_id: request_id(step), stay_open: stays_open(step))
  end

  def handle(step)
    @handles.fetch(step.fetch('handle')) { raise StepFailed, "no background acquire #{step['handle'].inspect}" }
  end

  def run_step(step)
    case (op = step.fetch('op'))
    when 'begin'
      req = V1::BeginTransactionRequest.new(timeout_ms: step.fetch('timeout_ms', 15_000), priority: step.fetch('priority', 0),
                                            name: field(step, 'name'), request_id: request_id(step),
                                            max_duration_ms: step.fetch('max_duration_ms', 0))
      out = @conn.unary(:begin_transaction, req)
      checks = check_outcome(step, out)
      return if checks.nil?

      @txns[step.fetch('txn')] = out.value.transaction_id
      @lost_stream[step['txn']] = true if step['lost_stream']
      eq('lease_timeout_ms', out.value.lease_timeout_ms, checks['lease_timeout_ms']) if checks.key?('lease_timeout_ms')
      eq('transaction id', out.value.transaction_id, @txns[checks['same_txn_as']]) if checks.key?('same_txn_as')
    when 'acquire', 'acquire_all'
      req = op == 'acquire' ? acquire_request(step) : acquire_all_request(step)
      if step['wait'] == false
        @handles[step.fetch('handle')] = Background.new(@conn, op, req, on_stay_open(step))
        return
      end
      out = @conn.acquire(req, on_stay_open(step))
      checks = check_outcome(step, out)
      check_acquired(op, checks, out.value) unless checks.nil?
    when 'expect_queued'
      q = handle(step).wait_queued(step.fetch('position'))
      step.fetch('blocked_by', []).each do |name|
        next if q.blocking_transaction_ids.include?(@txns[name])

        raise StepFailed, "queued at #{q.position} but not blocked by #{name} (#{@txns[name]}); " \
                          "blockers #{q.blocking_transaction_ids.to_a.sort}"
      end
    when 'await'
      bg = handle(step)
      out = bg.wait_outcome
      checks = check_outcome(step, out)
      check_acquired(bg.op, checks, out.value) unless checks.nil?
    when 'release'
      req = V1::ReleaseLockRequest.new(transaction_id: txn_id(step), namespace: field(step, 'namespace', '${ns}'),
                                       key: field(step, 'key'), request_id: request_id(step))
      out = @conn.unary(:release_lock, req)
      checks = check_outcome(step, out)
      eq('released', out.value.released, checks['released']) if checks&.key?('released')
    when 'downgrade'
      req = V1::DowngradeLockRequest.new(transaction_id: txn_id(step), namespace: field(step, 'namespace', '${ns}'),
                                         key: field(step, 'key'), request_id: request_id(step))
      out = @conn.unary(:downgrade_lock, req)
      checks = check_outcome(step, out)
      check_downgrade(checks, out.value) unless checks.nil?
    when 'verify_token'
      token = step.fetch('token')
      req = V1::VerifyFencingTokenRequest.new(namespace: field(step, 'namespace', '${ns}'), key: field(step, 'key'),
                                              fencing_token: token.is_a?(String) ? token(token) : token)
      out = @conn.unary(:verify_fencing_token, req)
      checks = check_outcome(step, out)
      check_verify(checks, out.value) unless checks.nil?
    when 'status'
      out = @conn.unary(:get_transaction_status, V1::GetTransactionStatusRequest.new(transaction_id: txn_id(step)))
      checks = check_outcome(step, out)
      check_status(checks, out.value) unless checks.nil?
    when 'heartbeat'
      out = @conn.unary(:heartbeat, V1::HeartbeatRequest.new(transaction_id: txn_id(step)))
      checks = check_outcome(step, out)
      if checks && checks['lease_remaining_positive'] && out.value.lease_remaining_ms <= 0
        raise StepFailed, "lease_remaining_ms is #{out.value.lease_remaining_ms}"
      end
    when 'end'
      req = V1::EndTransactionRequest.new(transaction_id: txn_id(step), commit: step.fetch('commit', true),
                                          request_id: request_id(step))
      out = @conn.unary(:end_transaction, req)
      checks = check_outcome(step, out)
      return if checks.nil?

      eq('state', Scenario.name_of(out.value.state), checks['state']) if checks.key?('state')
      eq('released_locks', out.value.released_locks, checks['released_locks']) if checks.key?('released_locks')
    when 'await_status'
      await_status(step)
    when 'sleep_ms'
      sleep step.fetch('ms') / 1000.0
    when 'set_lock_delay'
      req = V1::SetLockDelayRequest.new(namespace_prefix: field(step, 'namespace_prefix', '${ns}'),
                                        delay_ms: step.fetch('delay_ms', 0))
      out = @conn.unary(:set_lock_delay, req, admin: true)
      checks = check_outcome(step, out)
      if checks&.key?('previous_delay_ms')
        eq('previous_delay_ms', out.value.previous_delay_ms, checks['previous_delay_ms'])
      end
    when 'lock_delays'
      out = @conn.unary(:list_lock_delays, V1::ListLockDelaysRequest.new, admin: true)
      checks = check_outcome(step, out)
      if checks&.key?('rules')
        # Only this scenario's rules: other runs may share the server.
        got = out.value.rules.select { |r| r.namespace_prefix.start_with?(@ns) }.map { |r| [r.namespace_prefix, r.delay_ms] }
        eq('rules', got, checks['rules'].map { |w| [field(w, 'namespace_prefix'), w.fetch('delay_ms', 0)] })
      end
    when 'operator_abort'
      req = V1::AbortTransactionRequest.new(transaction_id: txn_id(step), reason: field(step, 'reason'),
                                            request_id: request_id(step))
      out = @conn.unary(:abort_transaction, req, admin: true)
      checks = check_outcome(step, out)
      eq('state', Scenario.name_of(out.value.state), checks['state']) if checks&.key?('state')
    when 'list_key'
      namespace = field(step, 'namespace', '${ns}')
      key = field(step, 'key')
      out = @conn.unary(:list_locks, V1::ListLocksRequest.new(namespace_prefix: namespace), admin: true)
      checks = check_outcome(step, out)
      check_listed(checks, out.value.locks.find { |k| k.namespace == namespace && k.key == key }) unless checks.nil?
    when 'watch'
      cursor = ''
      if step.key?('resume')
        cursor = @cursors.fetch(step['resume']) { raise StepFailed, "no saved cursor #{step['resume'].inspect}" }
      end
      req = V1::WatchKeyRequest.new(namespace: field(step, 'namespace', '${ns}'), key: field(step, 'key'), cursor: cursor)
      w = KeyWatch.new(@conn, req)
      @watches[step.fetch('handle')] = w
      first = begin
        Outcome.new(w.next_message)
      rescue StepFailed
        raise unless w.ended

        Outcome.new(nil, 'WATCH', nil, w.ended)
      end
      checks = check_outcome(step, first)
      return if checks.nil?

      eq('initial', first.value.initial, checks['initial']) if checks.key?('initial')
      check_watch(checks, first.value.holders.to_a, first.value.changes.to_a, first.value.cursor)
    when 'expect_watch'
      w = watch(step)
      checks = step.fetch('expect', {}).fetch('ok', {})
      want = checks.fetch('changes', []).size
      changes = []
      msg = nil
      loop do
        msg = w.next_message
        changes.concat(msg.changes.to_a)
        break if changes.size >= want
      end
      check_watch(checks, msg.holders.to_a, changes, msg.cursor)
    when 'unwatch'
      watch(step).cancel
      @watches.delete(step['handle'])
    when 'expect_lost'
      expect_lost(step)
    when 'expect_streams_closed'
      expect_streams_closed(step)
    else
      raise StepFailed, "unknown op #{op.inspect}"
    end
  end

  # nil if every step went as expected, else what failed first.
  def run
    @spec.fetch('steps').each.with_index(1) do |step, i|
      run_step(step)
    rescue StepFailed => e
      return "step #{i} (#{step['op']}): #{e.message}"
    rescue KeyError, TypeError, ArgumentError, RangeError => e # a malformed step
      return "step #{i} (#{step['op']}): bad step: #{e.inspect}"
    end
    nil
  ensure
    cleanup
  end

  # Ends whatever the scenario left open, so a failure does not hold locks.
  def cleanup
    @txns.each_value do |txn|
      @conn.unary(:end_transaction, V1::EndTransactionRequest.new(transaction_id: txn, commit: false))
    end
    @watches.each_value(&:cancel)
    @streams_lock.synchronize { @streams.each_value { |l| l.each(&:cancel) } }
  end
end

def main
  spec = JSON.parse(File.read(ARGS[:scenarios]))
  run = "cf-rb-#{SecureRandom.hex(3)}"
  conn = Connection.new(ARGS[:endpoint], ARGS[:api_key])
  counts = Hash.new(0)
  spec.fetch('scenarios').each_with_index do |scenario, index|
    name = scenario.fetch('name')
    next if !ARGS[:only].empty? && !ARGS[:only].include?(name)

    lacking = scenario.fetch('needs', []).reject { |n| CAPABILITIES.include?(n) }
    unless lacking.empty?
      counts['SKIP'] += 1
      puts "SKIP #{name} (needs #{lacking.join(', ')}: not implemented by this runner)"
      next
    end

    error = Scenario.new(conn, scenario, format('%<run>s-%<index>02d', run: run, index: index)).run
    verdict = error ? 'FAIL' : 'PASS'
    counts[verdict] += 1
    puts "#{verdict} #{name}#{error ? ": #{error}" : ''}"
    $stdout.flush
  end
  puts "ruby raw grpc runner: #{counts['PASS']} passed, #{counts['FAIL']} failed, #{counts['SKIP']} skipped (#{ARGS[:endpoint]})"
  $stdout.flush
  # Abandoned background acquires may still be blocked on their streams.
  exit!(counts['FAIL'].positive? ? 1 : 0)
end

main
