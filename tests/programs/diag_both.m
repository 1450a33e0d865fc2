function [B, d] = diag_both(A, v)
  % diag in both directions
  % test inputs: A=randn(5,5) v=randn(5,1)
  B = diag(v) * A * diag(v);
  d = diag(A * A');
end
