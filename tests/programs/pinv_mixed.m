function [C, D] = pinv_mixed(A, B)
  % a re-evaluated pseudo-inverse next to maintained products
  % test inputs: A=randn(6,4) B=randn(4,4)
  C = pinv(A) * A;
  D = A * B * B';
end
