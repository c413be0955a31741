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

V1 = Caerus::Dls::V1
CODE_NAMES = GRPC::Core::StatusCodes.constants.to_h { |c| [GRPC::Core::StatusCodes.const_get(c), c.to_s] }.freeze
UNKNOWN = Object.new.freeze
# The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry).
GRANT_CHECKS = %w[mode token_equals token_greater_than save_token].freeze

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
    end
  end

  def stub
    @lock.synchronize { @stub }
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

  def unary(method, request)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + PATIENCE_S
    begin
      Outcome.new(stub.public_send(method, request, metadata: @metadata, deadline: Time.now + PATIENCE_S))
    rescue GRPC::BadStatus => e
      retry if retry?(e, deadline)
      Outcome.error(e)
    end
  end

  # Follows the AcquireLock stream (AcquireLocks for an AcquireLocksRequest) to its grant
  # (a Granted, or a LocksGranted) or final status, re-attaching with the same request_id
  # when the serving node stops leading.
  def acquire(request, &on_queued)
    method = request.is_a?(V1::AcquireLocksRequest) ? :acquire_locks : :acquire_lock
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + request.timeout_ms / 1000.0 + PATIENCE_S
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

# A background AcquireLock or AcquireLocks (the step's op: acquire or acquire_all): its queued
# messages and, once over, its outcome.
class Background
  attr_reader :op

  def initialize(conn, op, request)
    @op = op
    @lock = Mutex.new
    @cond = ConditionVariable.new
    @queued = []
    @consumed = 0
    @outcome = nil
    @thread = Thread.new do
      outcome = conn.acquire(request) do |q|
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

  # ---- steps ------------------------------------------------------------------------------
  def acquire_request(step)
    V1::AcquireLockRequest.new(
      transaction_id: txn_id(step), namespace: field(step, 'namespace', '${ns}'), key: field(step, 'key'),
      mode: Scenario.mode(step), timeout_ms: step.fetch('timeout_ms', 10_000), request_id: request_id(step)
    )
  end

  def acquire_all_request(step)
    locks = step.fetch('locks').map do |w|
      V1::LockRequest.new(namespace: field(w, 'namespace', '${ns}'), key: field(w, 'key'), mode: Scenario.mode(w))
    end
    V1::AcquireLocksRequest.new(transaction_id: txn_id(step), locks: locks, timeout_ms: step.fetch('timeout_ms', 10_000),
                                request_id: request_id(step))
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
      eq('lease_timeout_ms', out.value.lease_timeout_ms, checks['lease_timeout_ms']) if checks.key?('lease_timeout_ms')
      eq('transaction id', out.value.transaction_id, @txns[checks['same_txn_as']]) if checks.key?('same_txn_as')
    when 'acquire', 'acquire_all'
      req = op == 'acquire' ? acquire_request(step) : acquire_all_request(step)
      if step['wait'] == false
        @handles[step.fetch('handle')] = Background.new(@conn, op, req)
        return
      end
      out = @conn.acquire(req)
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
    when 'sleep_ms'
      sleep step.fetch('ms') / 1000.0
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
