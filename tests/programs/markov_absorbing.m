function [N, t, B] = markov_absorbing(Q, R)
  % an absorbing Markov chain: fundamental matrix, expected steps, absorption
  % test inputs: Q=contraction(6) R=rand(6,2)
  N = inv(eye(rows(Q)) - Q);
  t = N * ones(rows(Q), 1);
  B = N * R;
end
